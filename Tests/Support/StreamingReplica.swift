import Foundation
import Logging
@testable import BookwormCore

/// A real streaming replica of the embedded test cluster: `pg_basebackup -R` into a cluster of
/// its own (own folder, own socket), started with `pg_ctl`. For the read-replica tests. Every
/// step blocks on a child process, so each runs on a thread of its own, never on the few
/// cooperative threads the other tests in this process need.
final class StreamingReplica: Sendable {
    let cluster: EmbeddedPostgres
    let base: String

    private init(cluster: EmbeddedPostgres, base: String) {
        self.cluster = cluster
        self.base = base
    }

    /// Short folder under /tmp: the socket path must stay under 104 bytes.
    static func start(primaryDataDirectory: String) async throws -> StreamingReplica {
        try await offThePool { try make(primaryDataDirectory: primaryDataDirectory) }
    }

    private static func make(primaryDataDirectory: String) throws -> StreamingReplica {
        let primary = EmbeddedPostgres(dataDirectory: primaryDataDirectory, logger: Logger(label: "replica"))
        let base = "/tmp/bwr-" + UUID().uuidString.prefix(8).lowercased()
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o711])
        let cluster = EmbeddedPostgres(dataDirectory: base, logger: Logger(label: "replica"))
        let replica = StreamingReplica(cluster: cluster, base: base)
        do {
            if getuid() == 0 { try cluster.run("/bin/chown", ["postgres:postgres", base], asPostgres: false) }
            let bin = try EmbeddedPostgres.binaryDirectory()
            try cluster.run(bin + "/pg_basebackup", ["-D", cluster.clusterDirectory, "-R", "-X", "stream", "-c", "fast",
                                                     "-h", primary.clusterDirectory, "-p", "5432", "-U", "bookworm"])
            // The copy holds the primary's socket lock file (its socket lives in its data folder).
            try? FileManager.default.removeItem(atPath: cluster.clusterDirectory + "/.s.PGSQL.5432.lock")
            // Its own socket folder; the rest (and `primary_conninfo`, written by -R) as the primary has it.
            let conf = cluster.clusterDirectory + "/postgresql.conf"
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: conf))
            try handle.seekToEnd()
            try handle.write(contentsOf: Data("\nunix_socket_directories = '\(cluster.clusterDirectory)'\nhot_standby = on\n".utf8))
            try handle.close()
            try cluster.run(bin + "/pg_ctl", ["-D", cluster.clusterDirectory, "-l", cluster.clusterDirectory + "/server.log",
                                              "-w", "-t", "60", "start"])
            return replica
        } catch {
            replica.removeNow()
            throw error
        }
    }

    func settings(database: String) -> DatabaseSettings { cluster.settings(database: database) }

    /// Stops the replica server (the primary keeps running).
    func stopServer() async throws {
        try await offThePool { self.stopNow() }
    }

    func remove() async throws {
        try await offThePool { self.removeNow() }
    }

    private func stopNow() {
        guard let bin = try? EmbeddedPostgres.binaryDirectory() else { return }
        _ = try? cluster.run(bin + "/pg_ctl", ["-D", cluster.clusterDirectory, "-m", "immediate", "-w", "-t", "30", "stop"],
                             allowFailure: true)
    }

    private func removeNow() {
        stopNow()
        try? FileManager.default.removeItem(atPath: base)
    }
}
