import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import BookwormApp
@testable import Accounts
@testable import BookwormTestSupport

@Suite struct AccountSecurityTests {
    @Test func tenFailuresThrottleTheAccountEvenForTheRightPassword() async throws {
        try await withApp { app in
            let account = try await app.register()
            for attempt in 1...10 {
                let response = try await app.request(.post, "/v1/auth/login", json: ["login": account.username, "password": "guess \(attempt)!"],
                                                     from: "203.0.113.\(attempt)")
                #expect(response.status == .unauthorized)
            }
            let right = try await app.request(.post, "/v1/auth/login", json: ["login": account.username, "password": account.password],
                                              from: "203.0.113.99")
            #expect(right.status == .tooManyRequests)
            let retry = try #require(right.headers[.retryAfter].flatMap(Int.init))
            #expect(retry > 0 && retry <= 900)
            #expect(right.isProblem)
        }
    }

    @Test func unknownAccountsAreThrottledTheSameWay() async throws {
        try await withApp { app in
            for attempt in 1...10 {
                _ = try await app.request(.post, "/v1/auth/login", json: ["login": "ghost", "password": "guess \(attempt)!"],
                                          from: "203.0.113.\(attempt)")
            }
            let next = try await app.request(.post, "/v1/auth/login", json: ["login": "ghost", "password": "another guess"],
                                             from: "203.0.113.50")
            #expect(next.status == .tooManyRequests)
        }
    }

    @Test func oneAddressIsThrottledAcrossAccounts() async throws {
        try await withApp { app in
            let victim = try await app.register(from: "192.0.2.200")
            for attempt in 1...10 {
                _ = try await app.request(.post, "/v1/auth/login", json: ["login": "someone_\(attempt)", "password": "guess!"],
                                          from: "192.0.2.7")
            }
            let fromAttacker = try await app.request(.post, "/v1/auth/login",
                                                     json: ["login": victim.username, "password": victim.password], from: "192.0.2.7")
            #expect(fromAttacker.status == .tooManyRequests)
            let fromVictim = try await app.request(.post, "/v1/auth/login",
                                                   json: ["login": victim.username, "password": victim.password], from: "192.0.2.200")
            #expect(fromVictim.status == .ok)
        }
    }

    @Test func throttleWindowExpires() async throws {
        try await withApp { app in
            let account = try await app.register()
            for _ in 1...10 {
                _ = try await app.request(.post, "/v1/auth/login", json: ["login": account.username, "password": "wrong guess"])
            }
            let blocked = try await app.request(.post, "/v1/auth/login", json: ["login": account.username, "password": account.password])
            #expect(blocked.status == .tooManyRequests)
            // Fifteen minutes pass for the throttle, without the test waiting for them.
            app.clock.advance(by: 15 * 60 + 1)
            let later = try await app.request(.post, "/v1/auth/login", json: ["login": account.username, "password": account.password])
            #expect(later.status == .ok)
        }
    }

    /// Behind the proxy the address is the hop the proxy added (the last), not one the client
    /// wrote in front of it: a made-up `X-Forwarded-For` dodges no throttle.
    @Test func aForwardedForTheClientWroteDoesNotDodgeTheThrottle() async throws {
        try await withApp(configure: { $0.throttles.registrations = 3 }) { app in
            for index in 1...3 { _ = try await app.register(from: "10.9.9.\(index), 198.51.100.77") }
            let fourth = try await app.request(.post, "/v1/auth/register", json: [
                "email": "fourth@example.org", "username": "fourth", "password": "correct horse battery"], from: "10.9.9.4,198.51.100.77")
            #expect(fourth.status == .tooManyRequests)
        }
    }

    /// Behind two proxies (a CDN, then a balancer) the client is the second hop from the right.
    @Test func behindTwoProxiesTheClientIsTheHopTheOuterOneAdded() async throws {
        #expect(try Config.fromEnvironment(["BOOKWORM_TRUST_FORWARDED_FOR": "2"]).forwardedForHops == 2)
        #expect(try Config.fromEnvironment(["BOOKWORM_TRUST_FORWARDED_FOR": "true"]).forwardedForHops == 1)
        #expect(try Config.fromEnvironment([:]).forwardedForHops == 0)
        for bad in ["11", "-1", "maybe"] {
            #expect(throws: ConfigError.self, "\(bad)") { try Config.fromEnvironment(["BOOKWORM_TRUST_FORWARDED_FOR": bad]) }
        }
        try await withApp(configure: { $0.throttles.registrations = 3; $0.forwardedForHops = 2 }) { app in
            for index in 1...3 { _ = try await app.register(from: "10.9.9.\(index), 198.51.100.77, 172.16.0.\(index)") }
            let fourth = try await app.request(.post, "/v1/auth/register", json: [
                "email": "fourth@example.org", "username": "fourth", "password": "correct horse battery"],
                from: "198.51.100.77, 172.16.0.9")
            #expect(fourth.status == .tooManyRequests)
        }
    }

    @Test func registrationIsThrottledPerAddress() async throws {
        try await withApp(configure: { $0.throttles.registrations = 3 }) { app in
            for _ in 1...3 { _ = try await app.register(from: "198.51.100.77") }
            let fourth = try await app.request(.post, "/v1/auth/register", json: [
                "email": "fourth@example.org", "username": "fourth", "password": "correct horse battery"], from: "198.51.100.77")
            #expect(fourth.status == .tooManyRequests)
            #expect(fourth.headers[.retryAfter] != nil)
            _ = try await app.register(from: "198.51.100.78")
        }
    }

    @Test func loginRehashesWhenParametersChanged() async throws {
        try await withApp { app in
            let account = try await app.register()
            let old = try PasswordHasher.hashNow(account.password, settings: .init(memoryLimitBytes: 16 * 1024, operationsLimit: 2))
            try await app.db.query("UPDATE users SET password_hash = \(old)")
            let login = try await app.request(.post, "/v1/auth/login", json: ["login": account.username, "password": account.password])
            #expect(login.status == .ok)
            let rows = try await app.db.query("SELECT password_hash FROM users")
            for try await hash in rows.decode(String.self) {
                #expect(hash != old)
                #expect(hash.hasPrefix("$argon2id$"))
                #expect(hash.contains("m=8,t=1"))
            }
        }
    }

    @Test func hashQueueFullAnswers503WithRetryAfter() async throws {
        let slow = PasswordHasher.Settings(memoryLimitBytes: 64 << 20, operationsLimit: 4, concurrency: 1, queueLimit: 0)
        try await withApp(configure: { $0.hashing = slow }) { app in
            let statuses = try await withThrowingTaskGroup(of: (HTTPResponse.Status, String?).self) { group in
                for attempt in 0..<6 {
                    group.addTask {
                        let response = try await app.request(.post, "/v1/auth/login",
                                                             json: ["login": "user\(attempt)", "password": "some password"],
                                                             from: "10.0.0.\(attempt)")
                        return (response.status, response.headers[.retryAfter])
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let rejected = statuses.filter { $0.0 == .serviceUnavailable }
            #expect(!rejected.isEmpty)
            #expect(rejected.allSatisfy { $0.1 != nil })
            #expect(statuses.allSatisfy { $0.0 == .serviceUnavailable || $0.0 == .unauthorized })
        }
    }

    @Test func hasherNeverRunsMoreThanItsConcurrency() async throws {
        // Slow hashes (~100 ms+), so the 20 arrive while the first ones still hold their slots.
        let hasher = try PasswordHasher(settings: .init(memoryLimitBytes: 64 << 20, operationsLimit: 3, concurrency: 2, queueLimit: 3))
        let results = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<20 {
                group.addTask { (try? await hasher.hash("password \(index)")) != nil }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results.filter { $0 }.count >= 5)
        #expect(results.filter { !$0 }.count >= 1)
        // Both threads were busy at the same moment, and never more than both.
        #expect(hasher.peakConcurrency == 2)
    }
}
