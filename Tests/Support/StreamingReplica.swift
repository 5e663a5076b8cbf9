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
            let log = base + "/server.log"
            let started = try cluster.runCapturing(bin + "/pg_ctl", ["-D", cluster.clusterDirectory, "-l", log, "-w", "-t", "60", "start"])
            guard started.status == 0 else {
                let tail = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").suffix(3000)
                throw EmbeddedPostgres.Failure(description: "the replica did not start: \(started.output)\n\(tail)")
            }
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

/// A primary of the replica test's own (its own folder and socket under /tmp), so that nothing
/// the replica does can reach the cluster every other test shares.
final class PrivatePrimary: Sendable {
    let cluster: EmbeddedPostgres
    let base: String
    let settings: DatabaseSettings

    private init(cluster: EmbeddedPostgres, base: String, settings: DatabaseSettings) {
        self.cluster = cluster
        self.base = base
        self.settings = settings
    }

    static func start(serverOptions: String? = nil) async throws -> PrivatePrimary {
        let base = "/tmp/bwp-" + UUID().uuidString.prefix(8).lowercased()
        var quiet = Logger(label: "primary")
        quiet.logLevel = .error
        let cluster = EmbeddedPostgres(dataDirectory: base, logger: quiet, fastAndLoose: true, serverOptions: serverOptions)
        do {
            let settings = try await cluster.start(database: "bookworm")
            return PrivatePrimary(cluster: cluster, base: base, settings: settings)
        } catch {
            try? await offThePool { try? FileManager.default.removeItem(atPath: base) }
            throw error
        }
    }

    func remove() async throws {
        try await offThePool {
            if let bin = try? EmbeddedPostgres.binaryDirectory() {
                _ = try? self.cluster.run(bin + "/pg_ctl", ["-D", self.cluster.clusterDirectory, "-m", "immediate", "-w", "-t", "30", "stop"],
                                          allowFailure: true)
            }
            try? FileManager.default.removeItem(atPath: self.base)
        }
    }
}
