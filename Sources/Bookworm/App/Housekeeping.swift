import Foundation
import Logging
import ServiceLifecycle

/// Periodically deletes dead sessions and old throttle events, so those tables stay small.
/// Idempotent, so it is harmless for several instances to run it.
struct Housekeeping: Service {
    let sessions: SessionStore
    let throttles: ThrottleStore
    let logger: Logger
    var interval: Duration = .seconds(600)

    func run() async throws {
        // Wait one interval first: at start-up the schema may still be migrating.
        while await sleepOneInterval() {
            do {
                try await sessions.deleteExpired()
                try await throttles.deleteOlderThan(seconds: 86400)
            } catch {
                logger.warning("housekeeping failed", metadata: ["error": .string(String(reflecting: error))])
            }
        }
    }

    /// False once the service is shutting down.
    private func sleepOneInterval() async -> Bool {
        (try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }) != nil
            && !Task.isShuttingDownGracefully && !Task.isCancelled
    }
}
