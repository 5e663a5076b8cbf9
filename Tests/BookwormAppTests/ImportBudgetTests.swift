import Foundation
import PostgresNIO
import Testing
import ZIPFoundation
#if canImport(Glibc)
import Glibc
#endif
@testable import BookwormCore
@testable import BookwormTestSupport

/// Hostile imports against real processes: a `bookworm serve` that takes the upload and a
/// `bookworm worker` that reads it. Whatever a file declares, neither process's peak memory
/// (`VmHWM`) rises more than 64 MiB above what it used idle, and the import fails naming why.
@Suite(.serialized) struct ImportBudgetTests {
    static let budget = 64 << 20

    @Test func aZipMemberThatLiesAboutItsSizeStopsAtTheBudget() async throws {
        // Declares 2 bytes, inflates to 256 MiB, with a correct CRC.
        let bomb = try Self.zip(member: "copies.json", size: 256 << 20) { count in Data(repeating: 0x20, count: count) }
        try await expectRefused(bomb, contentType: "application/zip", saying: "inflates past")
    }

    @Test func aZipOfTenMillionObjectsIsRefusedBeforeTheyAreBuilt() async throws {
        let objects = try Self.zip(member: "copies.json", size: 30_000_001, declared: nil) { count in
            var chunk = Data(capacity: count)
            while chunk.count < count { chunk.append(contentsOf: Array("{},".utf8.prefix(count - chunk.count))) }
            return chunk
        }
        try await expectRefused(objects, contentType: "application/zip", saying: "inflates past")
    }

    @Test func aJSONFileOfMillionsOfObjectsIsRefusedAtTheRowLimitWhileItIsRead() async throws {
        let json = Data(("[" + String(repeating: "{},", count: 3_000_000) + "{}]").utf8)
        try await expectRefused(json, contentType: "application/json", saying: "more than 20000 rows")
    }

    @Test func aZipMemberWithAWrongCRCFailsTheImport() async throws {
        var archive = try Self.zip(member: "copies.json", size: 64, declared: nil) { count in Data(repeating: 0x20, count: count) }
        Self.patch(&archive, field: 14, centralField: 16, value: 0xDEAD_BEEF)
        try await expectRefused(archive, contentType: "application/zip", saying: "CRC does not match")
    }

    @Test func aCSVFieldOfTenMiBIsRefusedAsItGrows() async throws {
        let header = "Book Id,Title,Author,Additional Authors,ISBN,ISBN13,Exclusive Shelf,Owned Copies\n"
        let csv = Data((header + "1,\"" + String(repeating: "x", count: (10 << 20) - 200) + "\",A,,,,read,1\n").utf8)
        try await expectRefused(csv, contentType: "text/csv", saying: "a field is longer than")
    }

    @Test func aJSONNestedAHundredThousandDeepIsRefusedBeforeParsing() async throws {
        let json = Data((String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)).utf8)
        try await expectRefused(json, contentType: "application/json", saying: "nests deeper than")
    }

    /// The largest honest file: a LibraryThing export of 10 MiB (built one book at a time).
    @Test func aTenMiBLibraryThingExportImportsWithinTheBudget() async throws {
        let books = (0..<16_000).map { index in
            #"{"books_id":"\#(index)","title":"Budget Book \#(index)","primaryauthor":"Writer, Some","collections":["Your library"],"#
                + #""comment":"\#(String(repeating: "r", count: 520))"}"#
        }
        let json = Data(("[" + books.joined(separator: ",") + "]").utf8)
        #expect(json.count > 9 << 20 && json.count < 10 << 20)
        try await expectRefused(json, contentType: "application/json", saying: nil)
    }

    /// The largest honest CSV: a Goodreads export of 20,000 rows, near 10 MiB.
    @Test func aTenMiBGoodreadsExportImportsWithinTheBudget() async throws {
        let rows = (0..<20_000).map { index in
            TestApp.goodreadsRow(["Book Id": "\(index)", "Title": "Budget Row \(index)", "Author": "Some Writer",
                                  "Exclusive Shelf": "read", "Owned Copies": "1", "My Review": String(repeating: "w", count: 440)])
        }
        let csv = Data(([TestApp.goodreadsHeader.joined(separator: ",")] + rows).joined(separator: "\n").utf8)
        #expect(csv.count > 9 << 20 && csv.count < 10 << 20, "\(csv.count)")
        try await expectRefused(csv, contentType: "text/csv", saying: nil)
    }

    /// A chunked upload gives no length up front: it is cut off where it passes 10 MiB, and the
    /// parts stored by then go with it.
    @Test func anUploadPastTheLimitWithoutALengthIsRefusedAndLeavesNothing() async throws {
        try await withTestDatabase { settings, client in
            let server = try await ServerProcess(databaseURL: settings.connectionURL)
            defer { server.stop() }
            let token = try Self.register(port: server.port)
            let socket = try RawSocket(port: server.port)
            try socket.send("POST /v1/me/imports HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n"
                            + "Content-Type: text/csv\r\nTransfer-Encoding: chunked\r\n\r\n")
            let line = Array("Book Id,Title,Author,Additional Authors,ISBN,ISBN13,Exclusive Shelf,Owned Copies\n".utf8)
            let chunk = Array(repeating: line, count: (1 << 20) / line.count).flatMap { $0 }
            for _ in 0..<11 { try? socket.send(Array("\(String(chunk.count, radix: 16))\r\n".utf8) + chunk + Array("\r\n".utf8)) }
            try? socket.send("0\r\n\r\n")
            #expect(socket.readResponse(timeout: 30)?.status == 413)
            #expect(try await Self.count("SELECT count(*)::int8 FROM imports", client) == 0)
            #expect(try await Self.count("SELECT count(*)::int8 FROM import_parts", client) == 0)
        }
    }

    /// A client gone mid-upload leaves no import (its parts go too), and may upload again.
    @Test func aClientThatGoesAwayMidUploadLeavesNothing() async throws {
        try await withTestDatabase { settings, client in
            let server = try await ServerProcess(databaseURL: settings.connectionURL)
            defer { server.stop() }
            let token = try Self.register(port: server.port)
            let line = "Book Id,Title,Author,Additional Authors,ISBN,ISBN13,Exclusive Shelf,Owned Copies\n"
            let body = Data(String(repeating: line, count: (3 << 20) / line.utf8.count).utf8)
            do {
                let socket = try RawSocket(port: server.port)
                try socket.send(Array(("POST /v1/me/imports HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n"
                                       + "Content-Type: text/csv\r\nContent-Length: \(5 << 20)\r\n\r\n").utf8) + Array(body))
                #expect(try await eventually(within: 30, interval: .milliseconds(50)) {
                    try await Self.count("SELECT count(*)::int8 FROM import_parts", client) >= 2
                })
            }
            #expect(try await eventually(within: 30, interval: .milliseconds(50)) {
                try await Self.count("SELECT count(*)::int8 FROM imports", client) == 0
            })
            #expect(try await Self.count("SELECT count(*)::int8 FROM import_parts", client) == 0)
            let again = try Self.post(port: server.port, "/v1/me/imports", body: body, contentType: "text/csv", token: token)
            #expect(again.status == 202, "\(again.body)")
            #expect(try await Self.count("SELECT count(*)::int8 FROM import_parts", client) == 3)
        }
    }

    static func count(_ sql: String, _ client: PostgresClient) async throws -> Int64 {
        for try await value in try await client.query(PostgresQuery(unsafeSQL: sql)).decode(Int64.self) { return value }
        return 0
    }

    static func register(port: Int) throws -> String {
        let name = "budget_\(UUID().uuidString.prefix(8).lowercased())"
        let registered = try rawRequest(port: port, "POST", "/v1/auth/register",
                                        json: #"{"email":"\#(name)@example.org","username":"\#(name)","password":"correct horse battery"}"#)
        let object = try JSONSerialization.jsonObject(with: Data(registered.body.utf8)) as? [String: Any]
        guard let token = object?["token"] as? String else { throw TestFailure("register: \(registered.body)") }
        return token
    }

    /// Uploads `body` and waits for the worker to finish or fail it; its final state.
    private static func importFile(_ body: Data, contentType: String, port: Int, token: String) async throws -> [String: Any] {
        let upload = try post(port: port, "/v1/me/imports", body: body, contentType: contentType, token: token)
        #expect(upload.status == 202, "\(upload.status) \(upload.body)")
        let id = try #require(try JSONSerialization.jsonObject(with: Data(upload.body.utf8)) as? [String: Any])["id"] as? String
        var status: [String: Any] = [:]
        let finished = try await eventually(within: 120, interval: .milliseconds(200)) {
            let answer = try rawRequest(port: port, "GET", "/v1/me/imports/\(id ?? "")", token: token)
            status = (try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any]) ?? [:]
            return status["status"] as? String == "failed" || status["status"] as? String == "done"
        }
        #expect(finished)
        return status
    }

    /// Uploads `body`, waits for the worker to fail the import (or, with no `message`, to finish
    /// it), and holds both processes' peak memory to the budget.
    private func expectRefused(_ body: Data, contentType: String, saying message: String?) async throws {
        try await withTestDatabase { settings, _ in
            let server = try await ServerProcess(databaseURL: settings.connectionURL)
            defer { server.stop() }
            let environment = bookwormEnvironment([
                "DATABASE_URL": settings.connectionURL, "LOG_LEVEL": "warning", "BOOKWORM_DB_POOL_SIZE": "4",
            ])
            let worker = try ChildProcess.spawn(try bookwormBinary(), ["worker"], environment: environment)
            defer { kill(worker, SIGTERM); _ = ChildProcess.wait(worker) }

            let token = try Self.register(port: server.port)
            // Idle is a worker that has imported a file already (its connections, its thread and
            // the runtime's first use are not the file's doing), and the peaks count from there.
            let warmUp = Data((TestApp.goodreadsHeader.joined(separator: ",") + "\n"
                + TestApp.goodreadsRow(["Book Id": "1", "Title": "Warm Up", "Author": "A. Author", "Exclusive Shelf": "read"]) + "\n").utf8)
            #expect(try await Self.importFile(warmUp, contentType: "text/csv", port: server.port, token: token)["status"] as? String == "done")
            let idle = (server: try Self.memory(server.pid, "VmRSS"), worker: try Self.memory(worker, "VmRSS"))
            for pid in [server.pid, worker] { try "5".write(toFile: "/proc/\(pid)/clear_refs", atomically: false, encoding: .utf8) }

            let status = try await Self.importFile(body, contentType: contentType, port: server.port, token: token)
            let errors = status["errors"] as? [[String: Any]] ?? []
            if let message {
                #expect(status["status"] as? String == "failed")
                #expect(errors.contains { ($0["message"] as? String)?.contains(message) == true }, "\(errors)")
            } else {
                #expect(status["status"] as? String == "done", "\(errors.prefix(3))")
            }
            let serverPeak = try Self.memory(server.pid, "VmHWM"), workerPeak = try Self.memory(worker, "VmHWM")
            #expect(serverPeak - idle.server <= Self.budget, "serve: \(idle.server >> 20) → \(serverPeak >> 20) MiB")
            #expect(workerPeak - idle.worker <= Self.budget, "worker: \(idle.worker >> 20) → \(workerPeak >> 20) MiB")
        }
    }

    /// A line of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in bytes.
    static func memory(_ pid: pid_t, _ field: String) throws -> Int {
        let text = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }),
              let kib = Int(line.split(separator: " ").dropFirst().first { !$0.isEmpty }?.trimmingCharacters(in: .whitespaces) ?? "") else {
            throw TestFailure("no \(field) for \(pid)")
        }
        return kib << 10
    }

    /// A zip with one deflated member of `size` bytes made by `chunk`; its header's uncompressed
    /// size then patched to `declared` (nil: left true).
    static func zip(member: String, size: Int, declared: UInt32? = 2, chunk: @escaping (Int) -> Data) throws -> Data {
        let archive = try Archive(data: Data(), accessMode: .create)
        try archive.addEntry(with: member, type: .file, uncompressedSize: Int64(size), compressionMethod: .deflate) { position, count in
            chunk(min(count, size - Int(position)))
        }
        var data = try #require(archive.data)
        if let declared { patch(&data, field: 22, centralField: 24, value: declared) }
        return data
    }

    /// Sets a 32-bit field of the first local header (at `field`) and of the first central
    /// directory record (at `centralField`).
    static func patch(_ data: inout Data, field: Int, centralField: Int, value: UInt32) {
        let bytes = withUnsafeBytes(of: value.littleEndian) { Array($0) }
        data.replaceSubrange(field..<field + 4, with: bytes)
        let central = Data([0x50, 0x4B, 0x01, 0x02])
        if let start = data.range(of: central)?.lowerBound {
            data.replaceSubrange(start + centralField..<start + centralField + 4, with: bytes)
        }
    }

    static func post(port: Int, _ path: String, body: Data, contentType: String, token: String) throws -> RawResponse {
        let socket = try RawSocket(port: port)
        let head = "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer \(token)\r\n"
            + "Content-Type: \(contentType)\r\nContent-Length: \(body.count)\r\n\r\n"
        try socket.send(Array(head.utf8) + Array(body))
        guard let response = socket.readResponse(timeout: 60) else { throw TestFailure("no answer to POST \(path)") }
        return response
    }
}
