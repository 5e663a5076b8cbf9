import Foundation
import HTTPTypes
import OpenAPIAsyncHTTPClient
import OpenAPIRuntime
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// A client generated at build time from the served document by swift-openapi-generator (the way
/// an iOS app consumes it), with swift-openapi-async-http-client as transport, against a real
/// `bookworm serve`: two people trade a loan from sign-up to sync.
@Suite struct GeneratedClientTests {
    @Test func theDocumentTheClientIsGeneratedFromIsTheOneTheServerServes() async throws {
        try await withTestDatabase { settings, _ in
            let server = try await ServerProcess(databaseURL: settings.connectionURL)
            defer { server.stop() }
            let served = try rawRequest(port: server.port, "GET", "/openapi.json").body
            let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            // The generator reads a link to the bundled document, not a copy that could drift.
            let link = try FileManager.default.destinationOfSymbolicLink(atPath: here.appendingPathComponent("openapi.json").path)
            #expect(link == "../../Sources/BookwormCore/Resources/openapi.json")
            #expect(served == (try String(contentsOf: here.appendingPathComponent("openapi.json"), encoding: .utf8)))
        }
    }

    @Test func aGeneratedClientLendsABookFromSignUpToSync() async throws {
        try await withTestDatabase { settings, pg in
            let server = try await ServerProcess(databaseURL: settings.connectionURL)
            defer { server.stop() }
            let db = Database.forTests(pg)
            let url = try #require(URL(string: "http://127.0.0.1:\(server.port)"))
            let anonymous = Client(serverURL: url, transport: AsyncHTTPClientTransport())
            let lender = try await Self.signUp("lender", anonymous, url: url, db: db)
            let borrower = try await Self.signUp("borrower", anonymous, url: url, db: db)

            // The lender pins a meetup point and lists a copy with a photo; the listing is sent twice under one key.
            let pin = try await lender.createPin(body: .json(.init(label: "Café", latitude: 52.52, longitude: 13.405, kind: .meetup)))
                .created.body.json
            let listing = Components.Schemas.CreateCopyRequest(title: "The Dispossessed", authors: ["Ursula K. Le Guin"], condition: .good,
                                                               pinId: pin.id)
            let listed = try await lender.createCopy(headers: .init(idempotencyKey: "list-dispossessed"), body: .json(listing)).created
            let again = try await lender.createCopy(headers: .init(idempotencyKey: "list-dispossessed"), body: .json(listing)).created
            #expect(listed.headers.idempotentReplayed == nil && again.headers.idempotentReplayed?.rawValue == "true")
            let copy = try listed.body.json
            #expect(try again.body.json.id == copy.id)
            let photo = try await lender.putPhoto(path: .init(id: copy.id), body: .jpeg(HTTPBody(try TestPictures.phoneJPEG())))
                .ok.body.json
            #expect(photo.photo != nil)

            // The borrower finds it nearby and asks to borrow it; the lender accepts; both confirm; it comes back.
            _ = try await borrower.createPin(body: .json(.init(label: "Home", latitude: 52.53, longitude: 13.41, kind: .home))).created
            let nearby = try await borrower.nearbyCopies(query: .init(latitude: 52.53, longitude: 13.41, radiusKm: 5)).ok.body.json
            #expect(nearby.data.map(\.value1.id).contains(copy.id))
            let due = ISO8601DateFormatter.string(from: Date().addingTimeInterval(30 * 86400), timeZone: TimeZone(identifier: "UTC") ?? .current,
                                                  formatOptions: [.withFullDate])
            let trade = try await borrower.requestTrade(body: .json(.init(copyId: copy.id, kind: .loan, dueOn: due))).created.body.json
            _ = try await lender.acceptTrade(path: .init(id: trade.id)).ok
            _ = try await lender.confirmTrade(path: .init(id: trade.id)).ok
            _ = try await borrower.confirmTrade(path: .init(id: trade.id)).ok
            let returned = try await lender.returnTrade(path: .init(id: trade.id)).ok.body.json
            #expect(returned.state == .returned)
            _ = try await borrower.rateTrade(path: .init(id: trade.id), body: .json(.init(score: 5))).created

            // The lender's phone pulls what changed: the pin, the copy and the trade.
            let page = try await lender.sync(query: .init()).ok.body.json
            let kinds = Set(page.changes.map(\._type))
            #expect(kinds.isSuperset(of: [.pin, .copy, .trade]), "\(kinds)")
        }
    }

    /// Registers and verifies with the code the verification mail carries (read from the outbox:
    /// `serve --no-worker` sends none), and answers a client that signs its calls.
    static func signUp(_ name: String, _ anonymous: Client, url: URL, db: Database) async throws -> Client {
        let registered = try await anonymous.register(body: .json(.init(email: "\(name)@example.org", username: name,
                                                                           password: "correct horse battery")))
        let token = try registered.created.body.json.token
        var code: String?
        for try await content in try await db.query("SELECT content FROM outbox_messages WHERE recipient = \("\(name)@example.org")")
            .decode(String.self) {
            code = content.firstMatch(of: /\b[0-9]{6}\b/).map { String($0.output) }
        }
        let client = Client(serverURL: url, transport: AsyncHTTPClientTransport(), middlewares: [Bearer(token: token)])
        _ = try await client.verifyEmail(body: .json(.init(code: try #require(code)))).noContent
        return client
    }

    struct Bearer: ClientMiddleware {
        let token: String
        func intercept(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
                       next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)) async throws
            -> (HTTPResponse, HTTPBody?) {
            var request = request
            request.headerFields[.authorization] = "Bearer \(token)"
            return try await next(request, body, baseURL)
        }
    }
}
