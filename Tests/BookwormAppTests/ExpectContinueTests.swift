import Foundation
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// `Expect: 100-continue`: a client that asks before sending its body (curl does above 1 MiB)
/// is told to go on once the server reads the body, and is refused on the head alone otherwise.
/// Each test sends the head and then waits for an answer before sending a byte of the body:
/// without the interim answer, none would come.
@Suite(.serialized) struct ExpectContinueTests {
    static let csv = "Book Id,Title,Author,Additional Authors,ISBN,ISBN13,Exclusive Shelf,Owned Copies\n"
        + "1,Expected Book,Some Author,,,,read,1\n"

    static func head(_ method: String, _ path: String, token: String?, contentType: String, length: Int,
                     expect: String = "100-continue", close: Bool = true) -> String {
        "\(method) \(path) HTTP/1.1\r\nHost: x\r\n" + (close ? "Connection: close\r\n" : "")
            + (token.map { "Authorization: Bearer \($0)\r\n" } ?? "")
            + "Content-Type: \(contentType)\r\nContent-Length: \(length)\r\nExpect: \(expect)\r\n\r\n"
    }

    @Test func anImportThatAsksFirstIsToldToContinueAndIsTaken() async throws {
        try await withServer { server in
            let token = try ImportBudgetTests.register(port: server.port)
            let socket = try RawSocket(port: server.port)
            try socket.send(Self.head("POST", "/v1/me/imports", token: token, contentType: "text/csv", length: Self.csv.utf8.count))
            let interim = try #require(socket.readResponse(timeout: 10), "no 100 Continue before the body")
            #expect(interim.status == 100)
            try socket.send(Self.csv)
            let final = try #require(socket.readResponse(timeout: 30))
            #expect(final.status == 202, "\(final.body)")
        }
    }

    /// curl keeps the connection: after the upload it asked about, the next request on it is answered.
    @Test func aContinuedUploadKeepsItsConnectionForTheNextRequest() async throws {
        try await withServer { server in
            let token = try ImportBudgetTests.register(port: server.port)
            let socket = try RawSocket(port: server.port)
            try socket.send(Self.head("POST", "/v1/me/imports", token: token, contentType: "text/csv", length: Self.csv.utf8.count,
                                      close: false))
            #expect(socket.readResponse(timeout: 10)?.status == 100)
            try socket.send(Self.csv)
            let final = try #require(socket.readResponse(timeout: 30))
            #expect(final.status == 202 && final.headers["connection"] != "close", "\(final.headers) \(final.body)")
            try socket.send("GET /health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(socket.readResponse(timeout: 10)?.status == 200)
        }
    }

    @Test func aJSONWriteThatAsksFirstIsToldToContinueToo() async throws {
        try await withServer { server in
            let token = try ImportBudgetTests.register(port: server.port)
            let body = #"{"display_name":"Asked First"}"#
            let socket = try RawSocket(port: server.port)
            try socket.send(Self.head("PATCH", "/v1/me", token: token, contentType: "application/json", length: body.utf8.count))
            #expect(socket.readResponse(timeout: 10)?.status == 100)
            try socket.send(body)
            let final = try #require(socket.readResponse(timeout: 30))
            #expect(final.status == 200, "\(final.body)")
            #expect(final.json?["display_name"] as? String == "Asked First")
        }
    }

    /// Refused on the head: the final answer comes at once, and no `100` before it, so the
    /// client never sends the body it asked about; it is told the connection will close.
    @Test(arguments: [
        ("a bad token", "nobody", "text/csv", 100, 401),
        ("a file past the limit", nil, "text/csv", 11 << 20, 413),
        ("a type that is not imported", nil, "image/png", 100, 415),
    ] as [(String, String?, String, Int, Int)])
    func anUploadRefusedOnItsHeadIsAnsweredWithoutAContinue(name: String, token: String?, contentType: String, length: Int,
                                                            status: Int) async throws {
        try await withServer { server in
            let registered = try ImportBudgetTests.register(port: server.port)
            let socket = try RawSocket(port: server.port)
            try socket.send(Self.head("POST", "/v1/me/imports", token: token ?? registered, contentType: contentType, length: length,
                                      close: false))
            let answer = try #require(socket.readResponse(timeout: 10), "no answer to the head")
            #expect(answer.status == status, "\(name): \(answer.status) \(answer.body)")
            #expect(answer.headers["connection"] == "close", "\(name): \(answer.headers)")
        }
    }

    @Test func anExpectationOtherThanContinueIsA417NamingTheHeader() async throws {
        try await withServer { server in
            let token = try ImportBudgetTests.register(port: server.port)
            let socket = try RawSocket(port: server.port)
            try socket.send(Self.head("POST", "/v1/me/imports", token: token, contentType: "text/csv", length: 10, expect: "200-ok"))
            let answer = try #require(socket.readResponse(timeout: 10))
            #expect(answer.status == 417)
            #expect(answer.headers["content-type"] == "application/problem+json")
            let errors = answer.json?["errors"] as? [[String: Any]]
            #expect(errors?.first?["field"] as? String == "Expect")
            // The served document says so for every operation that takes a body.
            let document = try #require(try rawRequest(port: server.port, "GET", "/openapi.json", timeout: 30).json)
            let operations = (document["paths"] as? [String: [String: Any]] ?? [:]).flatMap { path, item in
                item.compactMap { method, operation in (operation as? [String: Any]).map { ("\(method) \(path)", $0) } }
            }
            let withBodies = operations.filter { $0.1["requestBody"] != nil }
            #expect(withBodies.count > 20)
            let undocumented = withBodies.filter { ($0.1["responses"] as? [String: Any])?["417"] == nil }.map(\.0)
            #expect(undocumented.isEmpty, "\(undocumented.sorted())")
        }
    }

    private func withServer(_ body: @Sendable (ServerProcess) async throws -> Void) async throws {
        try await withTestDatabase { settings, _ in
            let server = try await ServerProcess(databaseURL: settings.connectionURL)
            defer { server.stop() }
            try await body(server)
        }
    }
}
