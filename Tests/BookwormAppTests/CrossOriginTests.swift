import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing
@testable import BookwormApp
@testable import BookwormCore
@testable import BookwormTestSupport

/// `BOOKWORM_CORS_ORIGINS`: which web pages may call the API from a browser. Preflights,
/// answers and errors through the app, the variable's parsing, and a real headless chromium
/// calling a real server process from an allowed page and from one that is not.
@Suite struct CrossOriginTests {
    static let app = "https://app.example.org"

    func preflight(_ app: TestApp, _ path: String, origin: String, method: String = "GET") async throws -> TestResponse {
        try await app.request(.options, path, headers: [.origin: origin, .accessControlRequestMethod: method,
                                                        .accessControlRequestHeaders: "authorization"])
    }

    @Test func aListedOriginsPagesMayCallTheAPIAndReadItsErrors() async throws {
        try await withApp(configure: { $0.crossOrigin = CrossOriginPolicy(allowed: .only([Self.app])) }) { app in
            let preflight = try await preflight(app, "/v1/me", origin: Self.app)
            #expect(preflight.status == .noContent)
            #expect(preflight.headers[.accessControlAllowOrigin] == Self.app)
            #expect(preflight.headers[.accessControlAllowMethods]?.contains("PATCH") == true)
            #expect(preflight.headers[.accessControlAllowHeaders]?.contains("Authorization") == true)
            #expect(preflight.headers[.accessControlMaxAge] == "600")

            let alice = try await app.register()
            let me = try await app.request(.get, "/v1/me", token: alice.token, headers: [.origin: Self.app])
            #expect(me.status == .ok)
            #expect(me.headers[.accessControlAllowOrigin] == Self.app)
            #expect(me.headers[.accessControlExposeHeaders]?.contains("ETag") == true)
            #expect(me.headers[values: .vary].contains("Origin"))
            // An error, and a conditional answer, are as readable to the page as a success.
            let refused = try await app.request(.get, "/v1/me", headers: [.origin: Self.app])
            #expect(refused.status == .unauthorized)
            #expect(refused.headers[.accessControlAllowOrigin] == Self.app)
            let etag = try #require(me.headers[.eTag])
            let unchanged = try await app.request(.get, "/v1/me", token: alice.token, headers: [.origin: Self.app, .ifNoneMatch: etag])
            #expect(unchanged.status == .notModified)
            #expect(unchanged.headers[.accessControlAllowOrigin] == Self.app)
        }
    }

    @Test func anUnlistedOriginGetsNoPermissionButTheRequestStillAnswers() async throws {
        try await withApp(configure: { $0.crossOrigin = CrossOriginPolicy(allowed: .only([Self.app])) }) { app in
            for origin in ["https://evil.example.org", "http://app.example.org", "https://app.example.org:8443"] {
                let preflight = try await preflight(app, "/v1/me", origin: origin)
                #expect(preflight.status == .forbidden, "\(origin)")
                #expect(preflight.headers[.contentType] == "application/problem+json")
                #expect(String(buffer: preflight.body).contains("origin_not_allowed"))
                #expect(preflight.headers[.accessControlAllowOrigin] == nil)
                // Not preflighted (a plain GET): answered as ever, without leave to read it.
                let page = try await app.request(.get, "/v1/copies", headers: [.origin: origin])
                #expect(page.status == .ok)
                #expect(page.headers[.accessControlAllowOrigin] == nil)
                #expect(page.headers[values: .vary].contains("Origin"))
            }
        }
    }

    @Test func aStarLetsEveryPageReadEveryAnswer() async throws {
        try await withApp(configure: { $0.crossOrigin = CrossOriginPolicy(allowed: .any) }) { app in
            let preflight = try await preflight(app, "/v1/me", origin: "https://anywhere.example")
            #expect(preflight.status == .noContent)
            #expect(preflight.headers[.accessControlAllowOrigin] == "*")
            for headers: HTTPFields in [[.origin: "https://anywhere.example"], [:]] {
                let page = try await app.request(.get, "/v1/copies", headers: headers)
                #expect(page.status == .ok)
                #expect(page.headers[.accessControlAllowOrigin] == "*")
                #expect(!page.headers[values: .vary].contains("Origin"))
            }
        }
    }

    @Test func withNoOriginsListedNoCrossOriginHeaderIsEverSent() async throws {
        try await withApp { app in
            let preflight = try await preflight(app, "/v1/me", origin: Self.app)
            #expect(preflight.status == .methodNotAllowed)
            #expect(preflight.headers[.accessControlAllowOrigin] == nil)
            let page = try await app.request(.get, "/v1/copies", headers: [.origin: Self.app])
            #expect(page.status == .ok)
            #expect(page.headers[.accessControlAllowOrigin] == nil)
            #expect(!page.headers[values: .vary].contains("Origin"))
        }
    }

    @Test func anyOriginIsAllowedWithAStarAndEveryOtherListIsCheckedAtStart() throws {
        func policy(_ value: String) throws -> CrossOriginPolicy {
            try Config.fromEnvironment(["BOOKWORM_CORS_ORIGINS": value]).crossOrigin
        }
        #expect(try policy("*").allowed == .any)
        #expect(try policy("*").allowOrigin(for: "https://anywhere.example") == "*")
        #expect(try policy("HTTPS://App.Example.org:443, http://localhost:5173").allowed
                == .only(["https://app.example.org", "http://localhost:5173"]))
        #expect(try Config.fromEnvironment([:]).crossOrigin.allowed == .none)
        for bad in ["app.example.org", "ftp://app.example.org", "https://app.example.org/path", "https://user@app.example.org",
                    "https://app.example.org?x=1", "https://", "*, https://app.example.org"] {
            #expect(throws: ConfigError.self, "\(bad)") { try policy(bad) }
        }
    }

    /// A real browser enforces what the headers say: the page served from the listed origin
    /// reads `GET /v1/me` (and its `ETag`); the same page from another origin cannot.
    @Test func aRealBrowserLetsOnlyTheListedOriginsPageReadTheAPI() async throws {
        try await withTestDatabase { settings, _ in
            try await ServerProcess.withFreePort { pagePort in
                let listed = "http://127.0.0.1:\(pagePort)"
                let server = try await ServerProcess(databaseURL: settings.connectionURL, environment: ["BOOKWORM_CORS_ORIGINS": listed])
                defer { server.stop() }
                let register = #"{"email":"web@example.org","username":"web_user","password":"correct horse battery"}"#
                let registered = try rawRequest(port: server.port, "POST", "/v1/auth/register", json: register)
                let token = try #require(registered.json?["token"] as? String, "\(registered.body)")
                let result = try await Browser.crossOrigin(pagePort: pagePort, api: "http://127.0.0.1:\(server.port)/v1/me", token: token)
                #expect(result.listed.status == 200, "\(result)")
                #expect(result.listed.username == "web_user")
                #expect(result.listed.etag?.isEmpty == false)
                // The same page from another port is another origin: the browser keeps the answer from it.
                #expect(result.other.status == nil && result.other.error != nil, "\(result)")
            }
        }
    }
}
