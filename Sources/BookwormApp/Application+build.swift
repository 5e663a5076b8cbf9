import Accounts
import BookwormCore
import Catalog
import Discovery
import Exchange
import Foundation
import Hummingbird
import Logging
import Mail
import Places
import Portability
import PostgresNIO
import ServiceLifecycle

package typealias BookwormApplication = Application<ChildTaskResponder<RouterResponder<AppRequestContext>>>

/// Assembles the whole service: database (embedded or `DATABASE_URL`), migrations policy,
/// stores, routes, middleware and background services. Used by `bookworm serve` and the tests.
package func buildApplication(config: Config) async throws -> BookwormApplication {
    let logger = {
        var logger = Logger(label: "bookworm")
        logger.logLevel = Logger.Level(rawValue: config.logLevel) ?? .info
        return logger
    }()

    var services: [any Service] = []
    let settings: DatabaseSettings
    var embedded: EmbeddedPostgres?
    if let url = config.databaseURL {
        settings = try DatabaseSettings(url: url)
    } else {
        let cluster = EmbeddedPostgres(dataDirectory: config.dataDirectory, logger: logger)
        settings = try await cluster.start(database: "bookworm")
        logger.notice("using embedded PostgreSQL", metadata: ["path": .string(cluster.clusterDirectory)])
        // First in the list, so the service group stops it last.
        services.append(cluster)
        embedded = cluster
    }
    logger.info("database", metadata: ["target": .stringConvertible(settings)])
    let migrator = try Migrator.bundled()
    do {
        // Before any service exists: workers and housekeeping must never see an unmigrated schema.
        try await prepareSchema(migrator, settings: settings, migrate: config.migrateOnStart || embedded != nil, logger: logger)
    } catch {
        embedded?.stop()
        throw error
    }

    let (database, primaryClients) = pools(settings, config: config, logger: logger)
    services += primaryClients
    var reads = database
    if let url = config.databaseReadURL {
        let (replica, replicaClients) = pools(try DatabaseSettings(url: url), config: config, logger: logger)
        services += replicaClients
        reads = Database.readReplica(client: replica.client, primary: database)
        if let replicaGeneric = replica.genericPlans, let primaryGeneric = database.genericPlans {
            reads = reads.withGenericPlans(replicaGeneric.readReplica(primary: primaryGeneric))
        }
    }
    let hasher = try PasswordHasher(settings: config.hashing)
    let photoMaker = try PhotoMaker(settings: config.photos)
    let parts = try makeRouter(config: config, client: database, reads: reads, hasher: hasher, photoMaker: photoMaker, migrator: migrator,
                               logger: logger)
    parts.router.addMethodNotAllowedResponders()
    services += [hasher, photoMaker] + parts.services
    if let port = config.metricsPort {
        services.append(metricsService(host: config.metricsHost, port: port,
                                       scrape: MetricsScrape(database: database, hasher: hasher, logger: logger), logger: logger))
    }
    if config.runWorker {
        logger.notice("mail", metadata: ["transport": .string(config.mail.transportDescription)])
        services += try workerServices(backgroundPools(settings, config: config, logger: logger), config: config, logger: logger)
    }

    // Each response is made in a child task, so that an open connection does not keep a deep stack.
    var app = Application(
        responder: ChildTaskResponder(parts.router.buildResponder()),
        server: serverPolicy(config.connections, logger: logger).serverBuilder(logger: logger),
        configuration: .init(address: .hostname(config.host, port: config.port), serverName: "bookworm"),
        services: services,
        logger: logger
    )
    app.beforeServerStarts {
        logger.notice("serving", metadata: ["address": .string("http://\(config.host):\(config.port)")])
    }
    return app
}

/// The app's pool of one database, and beside it the smaller pool whose sessions plan every
/// statement generically (`GenericPlanPool`, for the nearby statements; `Config.genericPoolSize`),
/// one part per event loop (none for some loops when it is smaller than their number). Returns
/// the database and every client, to run as services.
func pools(_ settings: DatabaseSettings, config: Config, logger: Logger,
           loops: [any EventLoop] = LoopExecutor.loops) -> (Database, [PostgresClient]) {
    let timeout = config.databaseDeadlines.statement
    let client = PostgresClient(configuration: settings.clientConfiguration(poolSize: config.databasePoolSize, statementTimeout: timeout,
                                                                           idleTimeout: config.databaseIdleTimeout),
                                backgroundLogger: logger)
    let usage = PoolUsage()
    let sized = zip(loops, GenericPlanPool.sizes(config.genericPoolSize, loops: loops.count)).filter { $0.1 > 0 }
    let generic = sized.map { loop, size in
        (loop: loop, client: PostgresClient(
            configuration: settings.clientConfiguration(poolSize: size, statementTimeout: timeout, genericPlans: true,
                                                        idleTimeout: config.databaseIdleTimeout),
            eventLoopGroup: loop, backgroundLogger: logger))
    }
    let pool = GenericPlanPool(byLoop: generic.map {
        (loop: $0.loop, database: Database(client: $0.client, deadlines: config.databaseDeadlines, usage: usage))
    })
    let database = Database(client: client, deadlines: config.databaseDeadlines, usage: usage).withGenericPlans(pool)
    return (database, [client] + generic.map(\.client))
}

/// Raises the open-files limit and keeps the connection cap below it, with room for the
/// database pool, the log and the mail transport.
func serverPolicy(_ requested: ConnectionPolicy, logger: Logger) -> ConnectionPolicy {
    var policy = requested
    let openFiles = raiseOpenFilesLimit()
    if let openFiles, openFiles - 256 < policy.maxConnections {
        policy.maxConnections = max(16, openFiles - 256)
        logger.warning("connection cap lowered to fit the open-files limit",
                       metadata: ["open_files": .stringConvertible(openFiles), "max_connections": .stringConvertible(policy.maxConnections)])
    }
    logger.info("connections", metadata: [
        "open_files": .string(openFiles.map(String.init) ?? "unknown"),
        "max_connections": .stringConvertible(policy.maxConnections),
        "idle_timeout_s": .stringConvertible(policy.idleTimeoutSeconds),
    ])
    return policy
}

/// Applies pending migrations when asked to (always on the embedded cluster), then refuses to
/// go on while any is pending, on a short-lived client of its own.
func prepareSchema(_ migrator: Migrator, settings: DatabaseSettings, migrate: Bool, logger: Logger) async throws {
    try await settings.makeClient(poolSize: 1, logger: logger).whileRunning { client in
        if migrate {
            try await migrator.up(client: client, logger: logger)
        }
        let pending = try await migrator.pending(client: client, logger: logger)
        guard pending.isEmpty else {
            throw MigrationError.pending(pending.map { String(format: "%04d_%@", $0.version, $0.name) })
        }
    }
}

/// The router with every route and middleware, and the background services the routes rely
/// on. Split from `buildApplication` so tests can list the routes (the OpenAPI check).
/// `reads` serves the read-only search endpoints (library, someone's copies, nearby, map, the
/// feed): the replica when `DATABASE_READ_URL` is set, else the primary. What a user just wrote
/// and reads back (`/v1/me/…`, a post by id) stays on the primary.
func makeRouter(config: Config, client: Database, reads: Database, hasher: PasswordHasher, photoMaker: PhotoMaker, migrator: Migrator,
                logger: Logger)
    throws -> (router: Router<AppRequestContext>, services: [any Service])
{
    let sessionCache = SessionCache()
    let sessions = SessionStore(client: client, policy: config.sessions, logger: logger, clock: config.clock, cache: sessionCache)
    let throttles = ThrottleStore(client: client, logger: logger, clock: config.clock)
    let users = AccountsStore(client: client, logger: logger)
    let outbox = OutboxStore(client: client, logger: logger, clock: config.clock)
    let templates = config.mailTemplates
    let accountMail = AccountMail(
        client: client, users: users, sessions: sessions, verifications: VerificationStore(client: client, logger: logger, clock: config.clock),
        outbox: outbox, templates: templates, throttles: throttles, hasher: hasher, logger: logger)
    let accounts = AccountsService(
        client: client, users: users, sessions: sessions, throttles: throttles, hasher: hasher, mail: accountMail,
        policy: config.throttles, logger: logger)
    let blocks = BlocksStore(client: client, logger: logger)

    let router = Router(context: AppRequestContext.self, options: .autoGenerateHeadEndpoints)
    router.add(middleware: RequestSetupMiddleware(maxBodyBytes: config.maxBodyBytes, forwardedForHops: config.forwardedForHops))
    router.add(middleware: AccessLogMiddleware(logger: logger))
    // Outside the problem middleware, so that errors too are readable by an allowed page.
    router.add(middleware: CrossOriginMiddleware(policy: config.crossOrigin))
    // Requests by route template, method and status, and their durations (a no-op without a metrics port).
    if config.metricsPort != nil { router.add(middleware: MetricsMiddleware()) }
    router.add(middleware: ExpectContinueMiddleware())
    router.add(middleware: ProblemMiddleware())
    router.add(middleware: InputSanityMiddleware())
    SystemRoutes(client: client, migrator: migrator, logger: logger,
                 openAPIDocument: try BundledResources.openAPIDocument(), drain: config.drain).addRoutes(to: router)
    // The pages behind the mail links (HTML, outside /v1).
    try AccountPages(mail: accountMail, publicBaseURL: config.mail.publicBaseURL).addRoutes(to: router)
    // Keyed writes (`Idempotency-Key`) inside the session middleware, so a key is the user's, and
    // inside `SyncTokenMiddleware`, which reads the sync position once the write has committed.
    let idempotency = IdempotencyMiddleware(store: config.idempotencyStore(client: client, logger: logger), database: client)
    let v1 = router.group("v1").add(middleware: idempotency)
    let syncTokens = SyncTokenMiddleware(client: client, logger: logger)
    let authenticated = router.group("v1").add(middleware: SessionMiddleware(sessions: sessions)).add(middleware: syncTokens)
        .add(middleware: idempotency)
    let optionallyAuthenticated = router.group("v1").add(middleware: SessionMiddleware(sessions: sessions, optional: true))
        .add(middleware: syncTokens).add(middleware: idempotency)
    let copies = CopiesService(client: client, logger: logger)
    let trades = config.tradesService(client: client, logger: logger)
    AccountsRoutes(service: accounts, profileFacts: { user in
        async let available = copies.availableCount(ownerID: user)
        let record = try await trades.summary(of: user)
        return ProfileFacts(availableCopies: try await available, completedTrades: record.completedTrades,
                            ratingAverage: record.ratingAverage, ratingCount: record.ratingCount)
    }).addRoutes(public: v1, optionallyAuthenticated: optionallyAuthenticated, authenticated: authenticated)
    AccountMailRoutes(mail: accountMail).addRoutes(public: v1, authenticated: authenticated)
    DevicesRoutes(service: DevicesService(client: client, clock: config.clock, logger: logger)).addRoutes(authenticated: authenticated)
    BlocksRoutes(blocks: blocks, users: users, block: { try await trades.block($0, by: $1) }).addRoutes(authenticated: authenticated)
    TradesRoutes(service: trades).addRoutes(optionallyAuthenticated: optionallyAuthenticated, authenticated: authenticated)
    let readings = ReadingsService(client: client, clock: config.clock, logger: logger)
    ReadingsRoutes(service: readings).addRoutes(optionallyAuthenticated: optionallyAuthenticated, authenticated: authenticated)
    ContactRoutes(service: ContactService(client: client, outbox: outbox, push: config.pushQueue(client: client, logger: logger),
                                          throttles: throttles, templates: templates,
                                          policy: config.contact, notify: config.notify, logger: logger))
        .addRoutes(authenticated: authenticated)
    BooksRoutes(books: BooksStore(client: client, logger: logger), clock: config.clock).addRoutes(public: v1, authenticated: authenticated)
    CopiesRoutes(service: copies, users: users, clock: config.clock, library: CopiesService(client: reads, logger: logger, frequencies: SearchFrequencies(clock: config.clock)),
                 publicUsers: AccountsStore(client: reads, logger: logger))
        .addRoutes(public: v1, optionallyAuthenticated: optionallyAuthenticated, authenticated: authenticated)
    // A paced upload reads nothing while it waits: it must not wait as long as the idle timeout.
    let uploads = UploadPace(bytesPerSecond: config.uploadBytesPerSecond, maxWait: Double(config.connections.idleTimeoutSeconds) / 2,
                             clock: config.clock)
    PhotosRoutes(service: PhotosService(client: client, maker: photoMaker, settings: config.photos, logger: logger), pace: uploads)
        .addRoutes(public: v1, authenticated: authenticated)
    PinsRoutes(service: PinsService(client: client, logger: logger)).addRoutes(authenticated: authenticated)
    NearbyRoutes(nearby: NearbyStore(client: reads, logger: logger)).addRoutes(authenticated: authenticated)
    MapRoutes(map: MapStore(client: reads, logger: logger)).addRoutes(authenticated: authenticated)
    let wishes = WishesService(client: client, policy: config.wishes, clock: config.clock, logger: logger)
    WishesRoutes(service: wishes).addRoutes(authenticated: authenticated)
    let google = addTrustRoutes(public: v1, authenticated: authenticated, config: config, client: client, sessions: sessions,
                                throttles: throttles, logger: logger)
    addPortabilityRoutes(to: authenticated, config: config, client: client, uploads: uploads, accounts: accounts, google: google,
                         trades: trades, readings: readings, wishes: wishes, outbox: outbox, templates: templates, logger: logger)
    PostsRoutes(service: PostsService(client: client, reads: reads, throttles: throttles, policy: config.feed, logger: logger))
        .addRoutes(optionallyAuthenticated: optionallyAuthenticated, authenticated: authenticated)
    let live = addLiveRoutes(authenticated: authenticated, config: config, client: client, sessions: sessions,
                             sessionChanges: SessionChanges(client: client, cache: sessionCache, logger: logger), logger: logger)
    return (router, live)
}

/// Sync, import, export and account erasure (the Portability room), on `authenticated`.
func addPortabilityRoutes(to authenticated: RouterGroup<AppRequestContext>, config: Config, client: Database, uploads: UploadPace,
                          accounts: AccountsService,
                          google: GoogleSignIn, trades: TradesService, readings: ReadingsService, wishes: WishesService, outbox: OutboxStore,
                          templates: MailTemplates, logger: Logger) {
    let sync = SyncService(client: client, readings: readings, wishes: wishes, trades: trades, policy: config.sync,
                           clock: config.clock, logger: logger)
    SyncRoutes(service: sync).addRoutes(authenticated: authenticated)
    let exports = ExportService(client: client, readings: readings, wishes: wishes, trades: trades,
                                photos: PhotosService(client: client, maker: nil, settings: config.photos, logger: logger),
                                clock: config.clock, logger: logger)
    ExportRoutes(service: exports).addRoutes(authenticated: authenticated)
    ImportRoutes(service: ImportService(client: client, policy: config.imports, clock: config.clock, logger: logger, pace: uploads))
        .addRoutes(authenticated: authenticated)
    ErasureRoutes(service: ErasureService(client: client, accounts: accounts, google: google, trades: trades, outbox: outbox, templates: templates,
                                          policy: config.erasure, clock: config.clock, logger: logger))
        .addRoutes(authenticated: authenticated)
}
