import BookwormCore
import Exchange
import Foundation
import Logging
import Mail
import PostgresNIO
import ServiceLifecycle

package enum OutboxAction: Sendable {
    case stats
    case list(status: String?, limit: Int)
    case retry(UUID)
    case discard(UUID)
}

/// `bookworm outbox stats|list|retry|discard`: the operator's view of the mail queue, as
/// readable tables. Addresses are shown masked; bodies (codes, reset links) never.
package func runOutboxCommand(_ action: OutboxAction, config: Config, logger: Logger) async throws -> String {
    try await withCommandDatabase(config: config, logger: logger) { client in
        let admin = OutboxAdmin(client: .forAdministration(client), logger: logger, clock: config.clock)
        switch action {
        case .stats: return try await admin.stats()
        case .list(let status, let limit): return try await admin.list(status: status, limit: limit)
        case .retry(let id): return try await admin.retry(id)
        case .discard(let id): return try await admin.discard(id)
        }
    }
}

/// `bookworm worker`: the workers without the API (several may run, in as many processes).
package func runWorkerCommand(config: Config, logger: Logger) async throws {
    var services: [any Service] = []
    let settings: DatabaseSettings
    if let url = config.databaseURL {
        settings = try DatabaseSettings(url: url)
    } else {
        let embedded = EmbeddedPostgres(dataDirectory: config.dataDirectory, logger: logger)
        settings = try await embedded.start(database: "bookworm")
        services.append(embedded)
    }
    // As `serve` does: the embedded cluster is migrated, a configured database must already be.
    try await prepareSchema(try Migrator.bundled(), settings: settings, migrate: config.databaseURL == nil, logger: logger)
    // No requests here to keep apart from: the workers read on every loop.
    let pools = backgroundPools(settings, config: config, logger: logger, group: BackgroundLoop.everyLoop)
    logger.notice("workers", metadata: ["transport": .string(config.mail.transportDescription)])
    if let port = config.metricsPort {
        let scrape = MetricsScrape(database: pools.jobs, hasher: nil, logger: logger)
        services.append(metricsService(host: config.metricsHost, port: port, scrape: scrape, logger: logger))
    }
    let group = ServiceGroup(configuration: .init(services: services + (try workerServices(pools, config: config, logger: logger)),
                                                  gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
    try await group.run()
}


/// `bookworm trades table`: the transition table the server runs, as Markdown (the README holds a copy a test checks).
package func tradeTransitionTable() -> String {
    TradeMachine.markdown()
}
