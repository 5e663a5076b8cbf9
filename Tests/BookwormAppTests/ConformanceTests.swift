import Foundation
import Testing
@testable import BookwormCore
@testable import BookwormApp
@testable import BookwormTestSupport

/// Schemathesis (every check) against the `/openapi.json` a real server serves, as a signed-in
/// user with data. `make test` installs it (`make conformance-deps`) and names it in
/// `BOOKWORM_SCHEMATHESIS`; the run is bounded by examples per operation, not by time.
@Suite struct ConformanceTests {
    /// Operations that end the caller's session run last, on a token of their own.
    static let secondPass = ["/v1/auth/logout", "/v1/auth/logout-all", "/v1/me/password"]
    /// Event streams stay open: schemathesis would wait on each until its timeout. `LiveEventsTests` covers them.
    static let streams = ["/v1/me/events", "/v1/posts/live"]

    @Test func theServedDocumentHoldsUnderSchemathesis() async throws {
        guard let schemathesis = ProcessInfo.processInfo.environment["BOOKWORM_SCHEMATHESIS"],
              FileManager.default.isExecutableFile(atPath: schemathesis) else {
            Issue.record("BOOKWORM_SCHEMATHESIS does not name the schemathesis executable; run `make test` (or `make conformance-deps`)")
            return
        }
        try await withTestDatabase { settings, _ in
            let server = try await ServerProcess(databaseURL: settings.connectionURL, environment: [
                "BOOKWORM_REGISTER_MAX_PER_HOUR": "100000", "BOOKWORM_LOGIN_MAX_FAILURES": "10000",
                "BOOKWORM_POSTS_PER_HOUR": "100000", "BOOKWORM_CONTACT_PER_HOUR": "100000",
                "BOOKWORM_CONTACT_PER_RECIPIENT_PER_DAY": "1000",
            ])
            defer { server.stop() }
            let port = server.port
            // Blocking calls (sockets, then waiting a minute for schemathesis), on a thread of
            // their own: on the cooperative pool they held one of its two threads all along.
            let token = try await offThePool { try Self.userWithData(port: port) }
            let main = try await offThePool {
                try Self.run(schemathesis, port: port, token: token, filters: (Self.secondPass + Self.streams).flatMap { ["--exclude-path", $0] })
            }
            #expect(main.status == 0, "schemathesis failed:\n\(main.output.suffix(6000))")
            let second = try await offThePool {
                try Self.run(schemathesis, port: port, token: try Self.login(port: port),
                             filters: Self.secondPass.flatMap { ["--include-path", $0] })
            }
            #expect(second.status == 0, "schemathesis failed on the session-ending operations:\n\(second.output.suffix(6000))")
        }
    }

    /// A user with a pin, a copy and a post, so reads return something.
    static func userWithData(port: Int) throws -> String {
        let registered = try rawRequest(port: port, "POST", "/v1/auth/register",
                                        json: #"{"email":"fuzz@example.org","username":"fuzzer","password":"correct horse battery"}"#)
        guard registered.status == 201, let token = registered.json?["token"] as? String else {
            throw TestFailure("register: \(registered.status) \(registered.body)")
        }
        let steps = [
            ("/v1/me/pins", #"{"label":"Home","latitude":52.37,"longitude":4.89,"kind":"home"}"#),
            ("/v1/me/copies", #"{"title":"Dune","authors":["Frank Herbert"],"condition":"good","isbn":"9780441013593"}"#),
            ("/v1/posts", #"{"kind":"offer","body":"Dune, good copy, swap for anything by Le Guin"}"#),
        ]
        for (path, json) in steps {
            let response = try rawRequest(port: port, "POST", path, json: json, token: token)
            guard response.status == 201 else { throw TestFailure("\(path): \(response.status) \(response.body)") }
        }
        return token
    }

    static func login(port: Int) throws -> String {
        let response = try rawRequest(port: port, "POST", "/v1/auth/login", json: #"{"login":"fuzzer","password":"correct horse battery"}"#)
        guard let token = response.json?["token"] as? String else { throw TestFailure("login: \(response.status)") }
        return token
    }

    static func run(_ executable: String, port: Int, token: String, filters: [String]) throws -> (status: Int32, output: String) {
        let config = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("conformance/schemathesis.toml").path
        let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("schemathesis-\(UUID().uuidString).log").path
        let arguments = ["--config-file", config, "run", "http://127.0.0.1:\(port)/openapi.json", "--checks", "all",
                         "-H", "Authorization: Bearer \(token)", "--max-examples", "10", "--seed", "20261123",
                         "--phases", "examples,coverage,fuzzing", "--workers", "1", "--suppress-health-check", "all",
                         "--generation-database", "none", "--request-timeout", "20"] + filters
        var environment = ProcessInfo.processInfo.environment
        environment["NO_COLOR"] = "1"
        let pid = try ChildProcess.spawn(executable, arguments, environment: environment, outputPath: outputPath)
        let status = ChildProcess.wait(pid)
        let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        return (status, output)
    }
}
