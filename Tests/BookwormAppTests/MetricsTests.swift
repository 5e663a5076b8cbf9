import Foundation
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// `/metrics` on its own port, scraped from a real server process after real traffic.
@Suite struct MetricsTests {
    /// The value of the first sample whose line starts with `name` and contains every fragment.
    static func sample(_ text: String, _ name: String, _ fragments: [String] = []) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(name) && !line.hasPrefix("#") {
            let head = line.split(separator: " ").dropLast().joined(separator: " ")
            guard head == name || head.hasPrefix(name + "{"), fragments.allSatisfy({ head.contains($0) }) else { continue }
            return line.split(separator: " ").last.flatMap { Double($0) }
        }
        return nil
    }

    @Test func requestsOutboxPoolAndHashingMoveByWhatTheTrafficDid() async throws {
        try await withTestDatabase { settings, _ in
            var chosen: (server: ServerProcess, metricsPort: Int)?
            try await ServerProcess.withFreePort { port in
                chosen = (try await ServerProcess(databaseURL: settings.connectionURL, environment: ["BOOKWORM_METRICS_PORT": String(port)]), port)
            }
            let (server, metricsPort) = try #require(chosen)
            defer { server.stop() }
            let missing = ["\"/v1/users/{username}\"", "\"404\"", "\"GET\""]
            for _ in 0..<3 { #expect(try rawRequest(port: server.port, "GET", "/v1/users/nobody_here").status == 404) }
            let register = #"{"email":"metrics@example.org","username":"metrics_user","password":"correct horse battery"}"#
            #expect(try rawRequest(port: server.port, "POST", "/v1/auth/register", json: register).status == 201)
            // Never on the public port.
            #expect(try rawRequest(port: server.port, "GET", "/metrics").status == 404)

            var text = ""
            let counted = try await eventually(within: 10) {
                text = try rawRequest(port: metricsPort, "GET", "/metrics").body
                return Self.sample(text, "hb_requests", missing) == 3
            }
            #expect(counted, "\(text.prefix(3000))")
            #expect(Self.sample(text, "http_server_request_duration_seconds_count", missing) == 3
                    || Self.sample(text, "http_server_request_duration_count", missing) == 3, "\(text.prefix(3000))")
            #expect(Self.sample(text, "hb_requests", ["\"/v1/auth/register\"", "\"201\""]) == 1)
            #expect(Self.sample(text, "bookworm_outbox_messages", ["status=\"queued\""]) == 1)
            #expect(Self.sample(text, "bookworm_outbox_due") == 1)
            #expect(Self.sample(text, "bookworm_hash_waiting") == 0)
            #expect(Self.sample(text, "bookworm_db_connections_waiting") == 0)
            #expect(Self.sample(text, "bookworm_db_connections_in_use") != nil)
            #expect(Self.sample(text, "bookworm_db_connections_replaced_total") == 0, "listed before the first one")

            // Two more: the counter moves by two.
            for _ in 0..<2 { _ = try rawRequest(port: server.port, "GET", "/v1/users/nobody_here") }
            let moved = try await eventually(within: 10) {
                text = try rawRequest(port: metricsPort, "GET", "/metrics").body
                return Self.sample(text, "hb_requests", missing) == 5
            }
            #expect(moved, "\(text.prefix(3000))")
        }
    }
}
