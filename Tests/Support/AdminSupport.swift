import Foundation
import HTTPTypes
import HummingbirdTesting
@testable import BookwormCore

extension TestApp {
    /// Runs the real `bookworm` executable (an admin at a terminal) against this test's
    /// database: (exit status, what it printed).
    func bookworm(_ arguments: [String], admin: String = "ops-alice", extra: [String: String] = [:]) async throws -> ChildProcess.Result {
        let environment = bookwormEnvironment(extra.merging(["DATABASE_URL": settings.connectionURL, "USER": admin]) { $1 })
        let binary = try bookwormBinary()
        return try await offThePool {
            let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("bookworm-cli-\(UUID().uuidString).out").path
            defer { unlink(outputPath) }
            let pid = try ChildProcess.spawn(binary, arguments, environment: environment, outputPath: outputPath)
            let status = ChildProcess.wait(pid)
            return ChildProcess.Result(status: status, output: (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "")
        }
    }

    /// `POST /v1/reports`, from the client `address`.
    func report(_ token: String, _ target: String, id: String? = nil, username: String? = nil, reason: String = "spam",
                details: String? = nil, from address: String = "198.51.100.1") async throws -> TestResponse {
        var body: [String: any Sendable] = ["target": target, "reason": reason]
        if let id { body["id"] = id }
        if let username { body["username"] = username }
        if let details { body["details"] = details }
        return try await request(.post, "/v1/reports", json: body, token: token, from: address)
    }
}
