import Foundation
import Hummingbird
import HummingbirdTesting
import PostgresNIO
@testable import BookwormCore
@testable import Mail
@testable import Accounts
@testable import Places
@testable import Catalog
@testable import Discovery
@testable import Exchange
@testable import BookwormApp

/// A running app on its own database, plus the helpers tests use to talk to it.
struct TestApp: Sendable {
    let client: any TestClientProtocol
    let db: Database
    let settings: DatabaseSettings
    /// The app's clock: expiry, throttle windows, backoff and leases move only when a test advances it.
    let clock: ManualClock

    /// Sends `body` (a JSON-encodable dictionary, or raw bytes) with the given token.
    @discardableResult
    func request(
        _ method: HTTPRequest.Method, _ path: String, json: [String: any Sendable]? = nil, raw: String? = nil,
        token: String? = nil, headers: HTTPFields = [:], from address: String = "198.51.100.1"
    ) async throws -> TestResponse {
        var headers = headers
        var body: ByteBuffer?
        if let json {
            body = ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: json))
            if headers[.contentType] == nil { headers[.contentType] = "application/json" }
        } else if let raw {
            body = ByteBuffer(string: raw)
            if headers[.contentType] == nil { headers[.contentType] = "application/json" }
        }
        if let token { headers[.authorization] = "Bearer \(token)" }
        if headers[.xForwardedFor] == nil { headers[.xForwardedFor] = address }
        return try await client.executeRequest(uri: path, method: method, headers: headers, body: body)
    }

    struct Account: Sendable {
        let id: String
        let username: String
        let email: String
        let password: String
        let token: String
    }

    /// Registers a user (unique names unless given) and returns its token.
    func register(username: String? = nil, email: String? = nil, password: String = "correct horse battery",
                  from address: String = "198.51.100.1") async throws -> Account {
        let suffix = String(UUID().uuidString.prefix(8)).lowercased()
        let name = username ?? "user_\(suffix)"
        let mail = email ?? "\(name)@example.org"
        let response = try await request(.post, "/v1/auth/register",
                                         json: ["email": mail, "username": name, "password": password], from: address)
        guard response.status == .created else {
            throw TestFailure("register failed: \(response.status) \(String(buffer: response.body))")
        }
        let object = try response.jsonObject()
        let user = object["user"] as? [String: Any]
        return Account(id: user?["id"] as? String ?? "", username: name, email: mail, password: password,
                       token: object["token"] as? String ?? "")
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension TestResponse {
    func jsonObject() throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any] else {
            throw TestFailure("body is not a JSON object: \(String(buffer: body))")
        }
        return object
    }

    /// The `field` names of a problem's `errors`.
    func problemFields() throws -> [String] {
        let errors = try jsonObject()["errors"] as? [[String: Any]] ?? []
        return errors.compactMap { $0["field"] as? String }
    }

    var isProblem: Bool { headers[.contentType] == "application/problem+json" }
}

extension Config {
    static func forTests(_ settings: DatabaseSettings) -> Config {
        var config = Config(databaseURL: settings.connectionURL, databasePoolSize: 4, hashing: .fastForTests,
                            forwardedForHops: 1, logLevel: "critical")
        // Tests drive the outbox themselves (or opt in to the worker), and mail never lands in the checkout.
        config.runWorker = false
        config.databaseDeadlines = Database.testDeadlines
        // Uploads of megabytes would wait on the manual clock for ever; the pace's own tests turn it on.
        config.uploadBytesPerSecond = 0
        // Likewise an import's rest between chunks; `ImportRestTests` turns it on.
        config.imports.restPercent = 0
        // A full run keeps both cores busy for minutes: SCHED_IDLE threads would get next to none
        // of them, and a photo or an import's reading would wait past any test's patience.
        config.photos.idle = false
        config.imports.readsIdle = false
        config.dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("bookworm-test-\(UUID().uuidString)").path
        return config
    }
}

/// Builds the real application (`buildApplication`) on a fresh database and runs `body`
/// against it through HummingbirdTesting's router client.
func withApp(
    configure: @Sendable (inout Config) -> Void = { _ in },
    _ body: @Sendable (TestApp) async throws -> Void
) async throws {
    try await withTestDatabase { settings, db in
        var config = Config.forTests(settings)
        let clock = ManualClock()
        config.clock = clock
        configure(&config)
        let app = try await buildApplication(config: config)
        try await app.test(.router) { client in
            do {
                try await body(TestApp(client: client, db: Database.forAdministration(db), settings: settings, clock: clock))
            } catch let error as PSQLError {
                // PSQLError's description hides the server's message; a failing test should show it.
                throw TestFailure(String(reflecting: error))
            }
        }
    }
}

/// The real application on a database of the caller's (a private cluster), not a fresh one.
func withApp(config: Config, on settings: DatabaseSettings, _ body: @Sendable (TestApp) async throws -> Void) async throws {
    let clock = ManualClock()
    var config = config
    config.clock = clock
    let app = try await buildApplication(config: config)
    let client = settings.makeClient(poolSize: 2, logger: TestDatabaseServer.shared.logger)
    try await client.whileRunning { db in
        try await app.test(.router) { testClient in
            try await body(TestApp(client: testClient, db: Database.forAdministration(db), settings: settings, clock: clock))
        }
    }
}
