import BookwormCore
import Foundation
import Logging
import Mail
import PostgresNIO
import ServiceLifecycle

/// The push worker: a runner of `push` jobs, a batch at a time, and the HTTP client they go out
/// on. Nil with no provider configured (nothing is queued then). The client comes first, so the
/// service group stops the runner before it.
package func pushWorker(client: Database, config: Config, logger: Logger) throws -> (transport: PushTransport, runner: JobRunner)? {
    guard !config.push.platforms.isEmpty else { return nil }
    let transport = try PushTransport(settings: config.push, clock: config.clock, logger: logger)
    let sender = PushSender(store: PushStore(client: client, logger: logger), transport: transport, settings: config.push,
                            clock: config.clock, logger: logger)
    return (transport, JobRunner(client: client, batch: sender, batchSize: config.push.batchSize, lease: config.push.lease, logger: logger,
                                 clock: config.clock))
}

/// As services, in the order to start them.
func pushServices(client: Database, config: Config, logger: Logger) throws -> [any Service] {
    guard let worker = try pushWorker(client: client, config: config, logger: logger) else {
        logger.notice("push: off (no APNS_KEY_FILE or FCM_SERVICE_ACCOUNT_FILE)")
        return []
    }
    logger.notice("push", metadata: ["providers": .string(config.push.platforms.joined(separator: ","))])
    return [worker.transport, worker.runner]
}

package enum PushAction: Sendable {
    case stats
    case test(username: String)
}

/// `bookworm push stats|test USERNAME`.
package func runPushCommand(_ action: PushAction, config: Config, logger: Logger) async throws -> String {
    try await withCommandDatabase(config: config, logger: logger) { client in
        let database = Database.forAdministration(client)
        let admin = PushAdmin(client: database, logger: logger)
        switch action {
        case .stats:
            return try await admin.stats(now: config.clock.now())
        case .test(let username):
            guard let worker = try pushWorker(client: database, config: config, logger: logger) else {
                return "Push is off: set APNS_KEY_FILE (with APNS_KEY_ID, APNS_TEAM_ID, APNS_TOPIC) or FCM_SERVICE_ACCOUNT_FILE."
            }
            do {
                let report = try await testPush(username, admin: admin, worker: worker, queue: config.pushQueue(client: database, logger: logger))
                try await worker.transport.shutdown()
                return report
            } catch {
                try? await worker.transport.shutdown()
                throw error
            }
        }
    }
}

/// Queues a test push to each of the user's devices and sends it at once.
private func testPush(_ username: String, admin: PushAdmin, worker: (transport: PushTransport, runner: JobRunner),
                      queue: PushQueue) async throws -> String {
    let jobs = try await admin.queueTest(username: username, queue: queue)
    guard !jobs.isEmpty else { return "\(username) has no device signed in that takes pushes." }
    try await worker.runner.runDue()
    let (done, waiting) = try await admin.outcome(of: jobs)
    return "\(done) of \(jobs.count) test pushes to \(username)'s devices left the queue (sent, or refused for good: the log says which)."
        + (waiting.isEmpty ? "" : "\nWaiting to retry: " + waiting.joined(separator: "; "))
}
