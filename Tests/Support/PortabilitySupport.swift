import Foundation
import HummingbirdTesting
import Logging
import NIOCore
import PostgresNIO
@testable import BookwormCore
@testable import BookwormApp

/// Imports and exports as a client sends them, and their jobs run the way a worker would.
extension TestApp {
    static let goodreadsHeader = [
        "Book Id", "Title", "Author", "Author l-f", "Additional Authors", "ISBN", "ISBN13", "My Rating", "Average Rating",
        "Publisher", "Binding", "Number of Pages", "Year Published", "Original Publication Year", "Date Read", "Date Added",
        "Bookshelves", "Bookshelves with positions", "Exclusive Shelf", "My Review", "Spoiler", "Private Notes", "Read Count",
        "Recommended For", "Recommended By", "Owned Copies", "Original Purchase Date", "Original Purchase Location",
        "Condition", "Condition Description", "BCID",
    ]

    /// One Goodreads line, written the way Goodreads writes it (every field that needs it quoted).
    static func goodreadsRow(_ values: [String: String]) -> String {
        goodreadsHeader.map { column in
            let value = values[column] ?? ""
            return value.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" }) || value.hasPrefix("=")
                ? "\"" + value.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : value
        }.joined(separator: ",")
    }

    func startImport(_ token: String, _ body: Data, contentType: String) async throws -> TestResponse {
        try await client.executeRequest(uri: "/v1/me/imports", method: .post,
                                        headers: [.authorization: "Bearer \(token)", .contentType: contentType, .xForwardedFor: "198.51.100.1"],
                                        body: ByteBuffer(bytes: body))
    }

    /// Starts an import and returns its id.
    func importFile(_ token: String, _ body: Data, contentType: String) async throws -> String {
        let response = try await startImport(token, body, contentType: contentType)
        guard response.status == .accepted, let id = try response.jsonObject()["id"] as? String else {
            throw TestFailure("import: \(response.status) \(String(buffer: response.body))")
        }
        return id
    }

    /// The jobs runner with imports of `chunk` records per chunk, `chunksPerRun` chunks per run,
    /// resting `restPercent` of a chunk's time after it (on the test's clock), a run ending at `runLimit`.
    func portabilityRunner(chunk: Int = 500, chunksPerRun: Int = 40, restPercent: Int = 0, runLimit: Duration = .seconds(60)) -> JobRunner {
        var config = Config.forTests(settings)
        config.clock = clock
        config.imports.chunk = chunk
        config.imports.chunksPerRun = chunksPerRun
        config.imports.restPercent = restPercent
        config.imports.runLimit = runLimit
        return backgroundJobs(client: db, config: config, logger: Logger(label: "test-jobs"))
    }

    func runAllJobs(chunk: Int = 500) async throws {
        let runner = portabilityRunner(chunk: chunk)
        try await runner.prepare()
        while try await runner.runDue() > 0 {}
    }

    func importStatus(_ token: String, _ id: String) async throws -> [String: Any] {
        try await request(.get, "/v1/me/imports/\(id)", token: token).jsonObject()
    }

    func count(_ sql: String, user: String) async throws -> Int {
        let rows = try await db.query(PostgresQuery(unsafeSQL: sql.replacingOccurrences(of: "$USER", with: "'\(user)'")))
        for try await value in rows.decode(Int64.self) { return Int(value) }
        return 0
    }
}
