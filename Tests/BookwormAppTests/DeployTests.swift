import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import BookwormCore
@testable import BookwormTestSupport

/// What the deployment files rely on from the binary: the health check the container runs, and
/// JSON log lines a shipper can read (`Deploy/`).
@Suite struct DeployTests {
    @Test func theHealthCommandPassesOnlyWhileTheServerIsReadyAndItLogsJSONLines() async throws {
        try await withTestDatabase { settings, _ in
            let server = try await ServerProcess(databaseURL: settings.connectionURL,
                                                 environment: ["BOOKWORM_LOG_FORMAT": "json", "LOG_LEVEL": "info"])
            // The server answers /health/live before its request pool has opened a connection; on
            // CI's loaded two cores the first readiness check, which opens one, once took longer
            // than the probe's 3 s, so the test waits for the server's own readiness first.
            let warm = try await eventually(within: 60, interval: .milliseconds(200)) {
                (try? rawRequest(port: server.port, "GET", "/health/ready", timeout: 10))?.status == 200
            }
            try #require(warm, "never ready: \(server.log.suffix(2000))")
            let ready = try ChildProcess.run(try bookwormBinary(), ["health", "--port", String(server.port)])
            #expect(ready.status == 0, "\(ready.output) \(server.log.suffix(2000))")
            _ = try rawRequest(port: server.port, "GET", "/v1/users/nobody_here", timeout: 5)
            server.stop()
            let gone = try ChildProcess.run(try bookwormBinary(), ["health", "--port", String(server.port)])
            #expect(gone.status == 1)

            let lines = server.log.split(separator: "\n").filter { !$0.isEmpty }
            let objects = lines.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
            #expect(!lines.isEmpty && objects.count == lines.count, "every line is one JSON object: \(server.log.suffix(1000))")
            let request = try #require(objects.first { $0["message"] as? String == "request" && $0["path"] as? String == "/v1/users/nobody_here" })
            #expect(request["route"] as? String == "/v1/users/{username}")
            #expect(request["status"] as? Int == 404)
            #expect(request["level"] as? String == "info" && request["time"] is String && request["request_id"] is String)
        }
    }

    @Test func theExampleEnvironmentFileNamesEveryVariableTheReadmeLists() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let example = try String(contentsOf: root.appendingPathComponent("Deploy/bookworm.env.example"), encoding: .utf8)
        let table = readme.components(separatedBy: "## Configuration (environment)")[1].components(separatedBy: "\n## ")[0]
        let variables = table.split(separator: "\n")
            .filter { $0.hasPrefix("| `") && !$0.contains("tests only") && !$0.contains("benchmarks only") }
            .compactMap { $0.split(separator: "`").dropFirst().first.map(String.init) }
        #expect(variables.count > 30)
        for variable in variables {
            #expect(example.contains("\(variable)="), "Deploy/bookworm.env.example lacks \(variable)")
        }
    }
}
