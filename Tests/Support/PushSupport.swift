import FakePush
import Foundation
import HummingbirdTesting
import Logging
import NIOConcurrencyHelpers
@testable import BookwormCore
@testable import Mail
@testable import BookwormApp

extension FakePushProvider {
    /// The settings those variables make; a test that waits out a silent provider shortens the timeout
    /// (a minute otherwise: a retried push would break a test's count of attempts).
    func settings(timeout: Int = 60, batchSize: Int? = nil) throws -> PushSettings {
        var settings = try PushSettings.fromEnvironment(EnvironmentReader(env: environment.merging(
            ["BOOKWORM_PUSH_TIMEOUT_SECONDS": String(timeout)]) { $1 }))
        if let batchSize { settings.batchSize = batchSize }
        return settings
    }

    /// A device token of each kind, unique to the test.
    static func apnsToken() -> String { (UUID().uuidString + UUID().uuidString).replacingOccurrences(of: "-", with: "").lowercased() }
    static func fcmToken() -> String { "fcm:" + (UUID().uuidString + UUID().uuidString).replacingOccurrences(of: "-", with: "_") }
}

/// An app whose pushes go to a fake APNs and FCM on the app's clock.
func withPushApp(configure: @Sendable @escaping (inout Config) -> Void = { _ in },
                 _ body: @Sendable (TestApp, FakePushProvider) async throws -> Void) async throws {
    // The app's clock, once the app exists: provider tokens are signed on it.
    let clock = NIOLockedValueBox<ManualClock?>(nil)
    let fake = try await FakePushProvider.start(now: { clock.withLockedValue { $0?.now() } ?? Date() })
    defer { fake.stop() }
    let settings = try fake.settings()
    try await withApp(configure: { config in
        config.push = settings
        configure(&config)
    }) { app in
        clock.withLockedValue { $0 = app.clock }
        try await body(app, fake)
    }
}

extension TestApp {
    /// The push worker on this test's database and clock, for the length of `body`.
    func withPushWorker<T: Sendable>(_ fake: FakePushProvider, timeout: Int = 60, batchSize: Int? = nil,
                                     _ body: (JobRunner, PushTransport) async throws -> T) async throws -> T {
        var config = Config.forTests(settings)
        config.clock = clock
        config.push = try fake.settings(timeout: timeout, batchSize: batchSize)
        guard let worker = try pushWorker(client: db, config: config, logger: Logger(label: "test-push")) else {
            throw TestFailure("push is off")
        }
        do {
            let result = try await body(worker.runner, worker.transport)
            try await worker.transport.shutdown()
            return result
        } catch {
            try? await worker.transport.shutdown()
            throw error
        }
    }

    /// Sends what is due, as a worker would, until nothing more is; returns the tokens made (APNs, FCM).
    @discardableResult
    func sendPushes(_ fake: FakePushProvider, timeout: Int = 60, batchSize: Int? = nil) async throws -> (apns: Int, fcm: Int) {
        try await withPushWorker(fake, timeout: timeout, batchSize: batchSize) { runner, transport in
            while try await runner.runDue() > 0 {}
            return await transport.tokensMade()
        }
    }

    /// Registers a phone for `token`'s session.
    @discardableResult
    func registerDevice(_ session: String, platform: String = "apns", token: String, environment: String? = nil) async throws -> TestResponse {
        var body: [String: any Sendable] = ["platform": platform, "token": token]
        if let environment { body["environment"] = environment }
        return try await request(.post, "/v1/me/devices", json: body, token: session)
    }

    /// Push jobs waiting: (attempts, seconds until due, last error).
    func queuedPushes() async throws -> [(attempts: Int, dueIn: Double, error: String?)] {
        var pushes: [(Int, Double, String?)] = []
        let rows = try await db.query("""
            SELECT attempts, EXTRACT(EPOCH FROM greatest(run_at, \(clock.now())) - \(clock.now()))::float8, last_error FROM jobs WHERE kind = 'push' ORDER BY created_at
            """)
        for try await row in rows.decode((Int, Double, String?).self) { pushes.append(row) }
        return pushes.map { (attempts: $0.0, dueIn: $0.1, error: $0.2) }
    }
}
