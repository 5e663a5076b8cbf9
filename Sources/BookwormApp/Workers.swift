import Accounts
import BookwormCore
import Catalog
import Discovery
import Exchange
import Logging
import Mail
import Portability
import PostgresNIO
import ServiceLifecycle

/// A worker's pools, in `serve` on `BackgroundLoop` so that requests never wait beside their replies. Jobs and
/// pushes: 7, since each runner's LISTEN holds one, the push runner has up to three out at once (a
/// claim, the next batch's load, the last batch's outcome) and the job runner one on each lane,
/// the long one sometimes for seconds (an import's chunk); they write what users wrote, so they
/// commit synchronously. Mail: 3,
/// committing asynchronously (a crash of PostgreSQL may send a mail twice; `DatabaseSettings`).
func backgroundPools(_ settings: DatabaseSettings, config: Config, logger: Logger,
                     group: any EventLoopGroup = BackgroundLoop.group) -> (jobs: Database, mail: Database) {
    let (timeout, idle) = (config.databaseDeadlines.statement, config.databaseIdleTimeout)
    var jobs = settings.clientConfiguration(poolSize: 7, statementTimeout: timeout, idleTimeout: idle)
    var mail = settings.clientConfiguration(poolSize: 3, statementTimeout: timeout, asynchronousCommit: true, idleTimeout: idle)
    // Named in `pg_stat_activity`, for an operator (and a test) to tell them from requests'.
    jobs.options.additionalStartupParameters.append(("application_name", "bookworm jobs"))
    mail.options.additionalStartupParameters.append(("application_name", "bookworm mail"))
    return (Database(client: PostgresClient(configuration: jobs, eventLoopGroup: group, backgroundLogger: logger), deadlines: config.databaseDeadlines),
            Database(client: PostgresClient(configuration: mail, eventLoopGroup: group, backgroundLogger: logger), deadlines: config.databaseDeadlines))
}

/// What a worker runs, in `serve` and in `bookworm worker`: its pools, the jobs and pushes on
/// `pools.jobs`, the outbox on `pools.mail`.
func workerServices(_ pools: (jobs: Database, mail: Database), config: Config, logger: Logger) throws -> [any Service] {
    let transport = try config.mail.transport(dataDirectory: config.dataDirectory, logger: logger)
    return [pools.jobs.client, pools.mail.client, backgroundJobs(client: pools.jobs, config: config, logger: logger)]
        + (try pushServices(client: pools.jobs, config: config, logger: logger))
        + [OutboxWorker(client: pools.mail, transport: transport, policy: config.mail.outbox, logger: logger, clock: config.clock)]
}

/// The leased-jobs runner with every kind of background work but mail (which has the outbox
/// worker): trade expiry and loan reminders, alert fan-out and digests, imports and exports, housekeeping. `serve` runs it unless
/// `--no-worker`; so does `worker`.
func backgroundJobs(client: Database, config: Config, logger: Logger) -> JobRunner {
    let outbox = OutboxStore(client: client, logger: logger, clock: config.clock)
    let templates = config.mailTemplates
    let trades = config.tradesService(client: client, logger: logger)
    let readings = ReadingsService(client: client, clock: config.clock, logger: logger)
    let wishes = WishesService(client: client, policy: config.wishes, clock: config.clock, logger: logger)
    let photos = PhotosService(client: client, maker: nil, settings: config.photos, logger: logger)
    let exports = ExportService(client: client, readings: readings, wishes: wishes, trades: trades, photos: photos,
                                clock: config.clock, logger: logger)
    let alerts = AlertJobParts(client: client, outbox: outbox, push: config.pushQueue(client: client, logger: logger), templates: templates,
                               policy: config.wishes, notify: config.notify, clock: config.clock, logger: logger)
    let imports = ImportService(client: client, policy: config.imports, clock: config.clock, logger: logger)
    return JobRunner(client: client, handlers: [
        TradeSweep(service: trades),
        ImportJob(service: imports),
        ExportJob(service: exports),
        Housekeeping(sessions: SessionStore(client: client, policy: config.sessions, logger: logger, clock: config.clock),
                     throttles: ThrottleStore(client: client, logger: logger, clock: config.clock), outbox: outbox,
                     syncLog: SyncStore(client: client, logger: logger), sync: config.sync,
                     holds: ErasureSweep(client: client, logger: logger), exports: exports, imports: imports,
                     idempotency: config.idempotencyStore(client: client, logger: logger),
                     failedMailRetentionDays: config.mail.outbox.failedRetentionDays, logger: logger, clock: config.clock),
        NewWishAlerts(alerts), AlertDigest(alerts),
        PhotoRemake(service: photos, clock: config.clock),
    ], grouped: [AlertFanOut(alerts)], logger: logger, clock: config.clock)
}
