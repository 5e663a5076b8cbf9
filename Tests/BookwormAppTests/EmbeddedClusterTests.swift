import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// Several real server processes on one embedded cluster (`EmbeddedPostgres`): none stops it
/// under another, and one starting while another stops it waits, then starts it again.
@Suite struct EmbeddedClusterTests {
    @Test func theFirstServerToStopLeavesTheClusterToTheOtherAndTheLastOneStopsIt() async throws {
        let (folder, cluster) = Self.newFolder()
        defer { Self.remove(folder, cluster) }
        let first = try await ServerProcess(databaseURL: nil, environment: ["BOOKWORM_DATA_DIR": folder])
        let second = try await ServerProcess(databaseURL: nil, environment: ["BOOKWORM_DATA_DIR": folder])
        first.stop()
        // Nothing between the starts and the stops throws, so no server outlives the test.
        #expect((try? rawRequest(port: second.port, "GET", "/health/ready", timeout: 10))?.status == 200)
        #expect((try? Self.registerStatus(port: second.port)) == 201)
        #expect((try? Self.isRunning(cluster)) == true)
        second.stop()
        #expect(try Self.isRunning(cluster) == false)
        #expect(FileManager.default.fileExists(atPath: cluster.startedMarkerPath) == false)
    }

    @Test func aServerStartingWhileAnotherStopsTheClusterWaitsThenStartsIt() async throws {
        let (folder, cluster) = Self.newFolder()
        defer { Self.remove(folder, cluster) }
        _ = try await cluster.start(database: "bookworm")
        // Leaves the cluster made but stopped, and this process out of its users; then it runs
        // again, started by hand as an operator would, and this test plays a process in the
        // middle of stopping it: the users' lock held alone, as `stop` holds it while pg_ctl runs.
        cluster.stop()
        let bin = try EmbeddedPostgres.binaryDirectory()
        _ = try await offThePool {
            try cluster.run(bin + "/pg_ctl", ["-D", cluster.clusterDirectory, "-l", cluster.clusterDirectory + "/server.log", "-w", "start"])
        }
        let stopper = open(cluster.usersLockPath, O_RDWR | O_CLOEXEC)
        #expect(stopper >= 0 && flock(stopper, LOCK_EX | LOCK_NB) == 0)
        let starting = Task { try await ServerProcess(databaseURL: nil, environment: ["BOOKWORM_DATA_DIR": folder]) }
        // The new server waits for the lock, not for a cluster about to go away.
        #expect(try await eventually { try Self.hasWaiter(onFile: cluster.usersLockPath) })
        _ = try await offThePool { try cluster.run(bin + "/pg_ctl", ["-D", cluster.clusterDirectory, "-m", "fast", "-w", "stop"]) }
        close(stopper)
        let server = try await starting.value
        defer { server.stop() }
        #expect(try rawRequest(port: server.port, "GET", "/health/ready", timeout: 10).status == 200)
        #expect(try Self.registerStatus(port: server.port) == 201)
    }

    /// A write, so the answer comes from the cluster itself.
    private static func registerStatus(port: Int) throws -> Int {
        try rawRequest(port: port, "POST", "/v1/auth/register",
                       json: #"{"email":"shared@example.org","username":"shared","password":"correct horse battery"}"#).status
    }

    private static func newFolder() -> (String, EmbeddedPostgres) {
        let folder = TestDatabaseServer.dataDirectory + "/shared-" + String(UUID().uuidString.prefix(8))
        return (folder, EmbeddedPostgres(dataDirectory: folder, logger: Logger(label: "embedded-test")))
    }

    private static func isRunning(_ cluster: EmbeddedPostgres) throws -> Bool {
        try cluster.run(try EmbeddedPostgres.binaryDirectory() + "/pg_ctl", ["-D", cluster.clusterDirectory, "status"], allowFailure: true) == 0
    }

    private static func remove(_ folder: String, _ cluster: EmbeddedPostgres) {
        if let bin = try? EmbeddedPostgres.binaryDirectory() {
            _ = try? cluster.run(bin + "/pg_ctl", ["-D", cluster.clusterDirectory, "-m", "immediate", "-w", "stop"], allowFailure: true)
        }
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// Whether `/proc/locks` lists a process blocked on a lock of the file at `path`
    /// (its blocked requests are the lines with `->`, naming the file's device and inode).
    private static func hasWaiter(onFile path: String) throws -> Bool {
        var info = stat()
        guard stat(path, &info) == 0 else { return false }
        let locks = try String(contentsOfFile: "/proc/locks", encoding: .utf8)
        return locks.split(separator: "\n").contains { $0.contains("->") && $0.contains(":\(info.st_ino) ") }
    }
}
