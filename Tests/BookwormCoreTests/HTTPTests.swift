import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOPosix
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Accounts
@testable import Catalog
@testable import BookwormApp
@testable import BookwormTestSupport

@Suite struct HTTPTests {
    @Test func base64URLMatchesFoundationsAlphabetAndRoundTrips() {
        // Every byte value in every position of a group of three, then random lengths.
        let patterned = (0..<3).map { shift in (0..<(256 + shift)).map { UInt8(truncatingIfNeeded: $0 + shift) } }
        for bytes in patterned + (0..<40).map({ count in (0..<count).map { _ in UInt8.random(in: 0...255) } }) {
            let text = SecureRandom.base64URL(bytes)
            let expected = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(text == expected)
            #expect(Data(base64URL: text) == Data(bytes))
        }
        #expect(Data(base64URL: "a*b") == nil)
    }

    /// Each request's handler runs on an event loop of the server's and comes back to the same
    /// loop after waiting on work done elsewhere (a detached task, on the cooperative pool);
    /// without `LoopBoundHTTP1Channel` it runs on the cooperative pool.
    @Test func handlersRunOnTheirConnectionsEventLoopAndResumeThere() async throws {
        let router = Router(context: AppRequestContext.self)
        router.get("where") { _, _ -> String in
            guard let before = MultiThreadedEventLoopGroup.currentEventLoop else { return "off the loops" }
            let elsewhere = await Task.detached { MultiThreadedEventLoopGroup.currentEventLoop == nil }.value
            guard elsewhere else { return "the detached work ran on a loop" }
            guard let after = MultiThreadedEventLoopGroup.currentEventLoop else { return "left the loops" }
            return before === after && LoopExecutor.of(after) != nil ? "on its loop" : "moved"
        }
        let app = Application(router: router, server: ConnectionPolicy().serverBuilder(logger: Logger(label: "loop-test")))
        try await app.test(.live) { client in
            for _ in 0..<20 {
                let response = try await client.execute(uri: "/where", method: .get)
                #expect(String(buffer: response.body) == "on its loop")
            }
        }
    }

    @Test func queryValuesDecodeLikeFoundationAndRefuseBrokenEscapes() {
        for text in ["plain", "a+b", "%C3%A9t%C3%A9", "%2B%20%25", "caf%c3%a9+au+lait", "", "~-._"] {
            let expected = text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
            #expect(Request.formDecoded(Substring(text)) == expected, "\(text)")
            #expect(expected != nil)
        }
        for broken in ["%", "%4", "%zz", "%C3", "%FF%FE", "a%2"] {
            #expect(Request.formDecoded(Substring(broken)) == nil, "\(broken)")
        }
    }

    @Test func queryValuesAreFoundByTheirDecodedNameAnywhereInTheQuery() throws {
        let query = "a=1&&b&c%20d=%E2%9C%93&e=&f=+x+&g=%E2%80%83hi%E2%80%83&a=2&=orphan&h=x%3Dy"
        let request = Request(head: HTTPRequest(method: .get, scheme: "http", authority: "localhost", path: "/v1/x?" + query),
                              body: .init(buffer: ByteBuffer()))
        #expect(request.queryValue("a") == "1")
        #expect(request.queryValue("b") == "")
        #expect(request.queryValue("c d") == "✓")
        #expect(request.queryValue("e") == "")
        #expect(request.queryValue("h") == "x=y")
        #expect(request.queryValue("") == nil)
        #expect(request.queryValue("zz") == nil)
        #expect(try request.queryText("f") == "x")
        // An em space either side is white space to Foundation, and trimmed as before.
        #expect(try request.queryText("g") == "hi")
        #expect(try request.queryText("e") == nil)
        #expect(throws: AppError.self) { try request.queryText("a", maxLength: 0) }
    }

    @Test func unknownRouteIsProblemJSON404() async throws {
        try await withApp { app in
            let response = try await app.request(.get, "/v1/no-such-thing")
            #expect(response.status == .notFound)
            #expect(response.isProblem)
            #expect(try response.jsonObject()["status"] as? Int == 404)
        }
    }

    @Test func wrongMethodIs405WithAllowHeader() async throws {
        try await withApp { app in
            let response = try await app.request(.delete, "/v1/auth/login")
            #expect(response.status == .methodNotAllowed)
            #expect(response.isProblem)
            #expect(response.headers[.allow] == "POST")
        }
    }

    @Test(arguments: ["{\"login\": x}", "{\"login\": \"a\",", "", "[1, 2]", "\"text\""])
    func malformedJSONIs400NeverA500(body: String) async throws {
        try await withApp { app in
            let response = try await app.request(.post, "/v1/auth/login", raw: body)
            #expect(response.status == .badRequest)
            #expect(response.isProblem)
            let detail = try response.jsonObject()["detail"] as? String ?? ""
            #expect(!detail.isEmpty)
        }
    }

    @Test func malformedJSONSaysWhere() async throws {
        try await withApp { app in
            let response = try await app.request(.post, "/v1/auth/login", raw: "{\"login\": x}")
            let detail = try response.jsonObject()["detail"] as? String ?? ""
            #expect(detail.contains("character 10"))
        }
    }

    @Test func unknownFieldIsRejectedByName() async throws {
        try await withApp { app in
            let response = try await app.request(.post, "/v1/auth/register", json: [
                "email": "a@example.org", "username": "mallory", "password": "long enough password",
                "is_admin": true, "id": "00000000-0000-0000-0000-000000000000",
            ])
            #expect(response.status == .badRequest)
            #expect(try response.problemFields() == ["id", "is_admin"])
        }
    }

    @Test func wrongFieldTypeNamesTheField() async throws {
        try await withApp { app in
            let response = try await app.request(.post, "/v1/auth/login", json: ["login": 42, "password": "x"])
            #expect(response.status == .badRequest)
            #expect(try response.problemFields() == ["login"])
        }
    }

    @Test func bodyOverTheLimitIs413() async throws {
        try await withApp(configure: { $0.maxBodyBytes = 4096 }) { app in
            let big = String(repeating: "a", count: 5000)
            let response = try await app.request(.post, "/v1/auth/login", raw: "{\"login\": \"\(big)\", \"password\": \"x\"}")
            #expect(response.status == .contentTooLarge)
            #expect(response.isProblem)
        }
    }

    @Test func defaultBodyLimitIsOneMebibyte() async throws {
        try await withApp { app in
            let big = String(repeating: "a", count: (1 << 20) + 10)
            let response = try await app.request(.post, "/v1/auth/login", raw: "{\"login\": \"\(big)\"}")
            #expect(response.status == .contentTooLarge)
        }
    }

    @Test(arguments: ["text/plain", "application/x-www-form-urlencoded", "application/jsonp"])
    func wrongMediaTypeIs415(type: String) async throws {
        try await withApp { app in
            let response = try await app.request(.post, "/v1/auth/login", raw: "{}", headers: [.contentType: type])
            #expect(response.status == .unsupportedMediaType)
            #expect(response.isProblem)
        }
    }

    @Test func jsonWithCharsetParameterIsAccepted() async throws {
        try await withApp { app in
            let response = try await app.request(.post, "/v1/auth/login", json: ["login": "nobody", "password": "whatever"],
                                                 headers: [.contentType: "application/json; charset=utf-8"])
            #expect(response.status == .unauthorized)
        }
    }

    @Test func requestIDIsEchoedOrGenerated() async throws {
        try await withApp { app in
            let echoed = try await app.request(.get, "/health/live", headers: [.xRequestID: "abc-123"])
            #expect(echoed.headers[.xRequestID] == "abc-123")
            let generated = try await app.request(.get, "/v1/missing")
            #expect(generated.headers[.xRequestID]?.count == 36)
            let unsafe = try await app.request(.get, "/health/live", headers: [.xRequestID: "bad id\u{7f}"])
            #expect(unsafe.headers[.xRequestID] != "bad id\u{7f}")
        }
    }

    @Test func generatedRequestIDsAreDistinctUUIDShapedHex() {
        let ids = (0..<20_000).map { _ in RequestIDs.next() }
        #expect(Set(ids).count == ids.count)
        for id in ids.prefix(100) {
            #expect(UUID(uuidString: id) != nil && id == id.lowercased() && id.count == 36, "\(id)")
        }
        // The counter is mixed, not shown: consecutive ids differ in many digits.
        let differing = zip(ids[0].utf8, ids[1].utf8).filter { $0 != $1 }.count
        #expect(differing > 4)
        #expect(RequestIDs.format(high: 0x0123_4567_89ab_cdef, low: 0xfedc_ba98_7654_3210) == "01234567-89ab-cdef-fedc-ba9876543210")
    }

    @Test func healthEndpointsAnswer() async throws {
        try await withApp { app in
            #expect(try await app.request(.get, "/health/live").status == .ok)
            let ready = try await app.request(.get, "/health/ready")
            #expect(ready.status == .ok)
            #expect(try ready.jsonObject()["status"] as? String == "ready")
        }
    }

    @Test func openAPIDocumentCoversEveryRoute() async throws {
        let response: TestResponse = try await withAppValue { app in
            try await app.request(.get, "/openapi.json")
        }
        #expect(response.status == .ok)
        let document = try response.jsonObject()
        #expect((document["openapi"] as? String)?.hasPrefix("3.1") == true)
        let paths = document["paths"] as? [String: [String: Any]] ?? [:]
        var documented = Set<String>()
        for (path, operations) in paths {
            for method in operations.keys { documented.insert("\(method.uppercased()) \(path)") }
        }
        let settings = DatabaseSettings(endpoint: .tcp(host: "127.0.0.1", port: 1), username: "x", password: nil, database: "x")
        let logger = Logger(label: "test")
        let database = Database(client: settings.makeClient(logger: logger))
        let parts = try makeRouter(config: Config(), client: database, reads: database,
                                   hasher: PasswordHasher(settings: .fastForTests), photoMaker: PhotoMaker(settings: .init(concurrency: 1)),
                                   migrator: Migrator.bundled(), logger: logger)
        let served = Set(parts.router.routes.filter { $0.method != .head }.map { route -> String in
            let path = route.path.description.split(separator: "/").map { $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0) }
            return "\(route.method.rawValue) /" + path.joined(separator: "/")
        })
        #expect(served.subtracting(documented).isEmpty, "undocumented: \(served.subtracting(documented).sorted())")
        #expect(documented.subtracting(served).isEmpty, "documented but not served: \(documented.subtracting(served).sorted())")
    }
}

/// `withApp` that hands back what the body returns.
func withAppValue<T: Sendable>(_ body: @Sendable @escaping (TestApp) async throws -> T) async throws -> T {
    let box = ResultBox<T>()
    try await withApp { app in box.value = try await body(app) }
    guard let value = box.value else { throw TestFailure("no value") }
    return value
}

final class ResultBox<T: Sendable>: @unchecked Sendable {
    var value: T?
}
