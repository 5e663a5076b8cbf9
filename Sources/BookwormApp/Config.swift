import Accounts
import Catalog
import BookwormCore
import Discovery
import Exchange
import Foundation
import Logging
import Mail
import Portability

/// Everything the service reads from its environment (12-factor). Every variable is listed in
/// the README; `description` never includes a secret.
package struct Config: Sendable {
    package var host: String
    package var port: Int
    /// `nil` means: start the embedded PostgreSQL cluster under `dataDirectory`.
    var databaseURL: String?
    /// A read replica for the search endpoints (`DATABASE_READ_URL`); unset: the primary serves all.
    package var databaseReadURL: String?
    var dataDirectory: String
    package var databasePoolSize: Int
    /// The pool for the nearby statements (`BOOKWORM_DB_GENERIC_POOL_SIZE`); unset: `genericPoolSize`.
    package var databaseGenericPoolSize: Int?
    /// Connection acquisition and statement deadlines (`BOOKWORM_DB_ACQUIRE_TIMEOUT_MS`, `BOOKWORM_DB_STATEMENT_TIMEOUT_MS`).
    package var databaseDeadlines = DatabaseDeadlines()
    /// How long a pooled connection may sit idle before it is closed (`BOOKWORM_DB_IDLE_SECONDS`).
    package var databaseIdleTimeout = DatabaseSettings.defaultIdleTimeout
    var hashing: PasswordHasher.Settings
    /// Photos made at once (`BOOKWORM_IMAGE_CONCURRENCY`, default: cores) and waiting (`BOOKWORM_IMAGE_QUEUE`).
    package var photos = PhotoMaker.Settings()
    /// Event streams per process (`BOOKWORM_MAX_STREAMS`) and their heartbeat (`BOOKWORM_EVENTS_HEARTBEAT_SECONDS`).
    package var live = LiveStreams.Settings()
    package var sessions: SessionPolicy
    package var throttles: ThrottlePolicy
    package var feed: FeedPolicy
    package var mail: MailSettings
    /// Push providers (`APNS_*`, `FCM_*`); none configured: pushes are not queued.
    package var push = PushSettings()
    package var contact: ContactPolicy
    /// Mail one person makes the service send others: trades and contact share it
    /// (`BOOKWORM_NOTIFY_PER_RECIPIENT_PER_DAY`, `BOOKWORM_NOTIFY_PER_SENDER_PER_HOUR`).
    package var notify = NotifyPolicy()
    package var trades = TradePolicy()
    package var wishes = WishPolicy()
    /// Days sync tombstones are kept (`BOOKWORM_SYNC_TOMBSTONE_DAYS`); an older token is 410.
    package var sync = SyncPolicy()
    /// Hours a write's answer is kept under its `Idempotency-Key` (`BOOKWORM_IDEMPOTENCY_HOURS`).
    package var idempotencyHours = 24
    /// Days an erased account's username stays unavailable (`BOOKWORM_USERNAME_HOLD_DAYS`).
    package var erasure = ErasurePolicy()
    /// Import limits (10 MiB, 20,000 rows), the records per chunk and chunks per job run, and the
    /// rest after each chunk (`BOOKWORM_IMPORT_REST_PERCENT`).
    package var imports = ImportPolicy()
    /// Bytes per second taken from import and photo uploads, all together (`BOOKWORM_UPLOAD_MIB_PER_SECOND`;
    /// 0: no limit), so that uploads arriving at once do not take every core from other requests.
    package var uploadBytesPerSecond = 32 << 20
    /// Different reporters that hide a copy or post until an admin decides (`BOOKWORM_REPORT_HIDE_THRESHOLD`),
    /// and how old their accounts must be to count (`BOOKWORM_REPORT_MIN_ACCOUNT_HOURS`).
    package var reports = ReportPolicy()
    /// Google sign-in: on with `GOOGLE_CLIENT_IDS`; keys from `GOOGLE_JWKS_URL`.
    package var google = GoogleSettings()
    /// Run the outbox worker inside `serve` (off with `serve --no-worker`).
    package var runWorker = true
    package var maxBodyBytes: Int
    /// Idle timeout and connection cap of the HTTP server.
    package var connections = ConnectionPolicy()
    /// How many proxies in front append to `X-Forwarded-For` (0: the socket peer is the client).
    package var forwardedForHops: Int
    /// Web origins whose pages may call the API from a browser (`BOOKWORM_CORS_ORIGINS`).
    package var crossOrigin = CrossOriginPolicy()
    package var logLevel: String
    /// `text` (human-readable, the default) or `json` (one object a line) (`BOOKWORM_LOG_FORMAT`).
    package var logFormat: LogFormat = .text
    /// `/metrics` listener (`BOOKWORM_METRICS_HOST`, `BOOKWORM_METRICS_PORT`); off without a port.
    package var metricsHost = "127.0.0.1"
    package var metricsPort: Int?
    /// Apply pending migrations before serving (`serve --migrate`; always for the embedded default).
    package var migrateOnStart: Bool = false
    /// What every expiry, window, lease and pause is measured on; tests put a manual clock here.
    package var clock: any AppClock = SystemClock()
    /// Seconds `serve` keeps serving after SIGTERM, `/health/ready` answering 503
    /// (`BOOKWORM_SHUTDOWN_DRAIN_SECONDS`).
    package var shutdownDrainSeconds: Double = 5
    /// Whether that drain has begun, shared by the signal handler and `/health/ready`.
    package var drain = ShutdownDrain()

    package init(
        host: String = "127.0.0.1",
        port: Int = 8080,
        databaseURL: String? = nil,
        dataDirectory: String = ".bookworm",
        databasePoolSize: Int = 20,
        hashing: PasswordHasher.Settings = .init(),
        sessions: SessionPolicy = .init(),
        throttles: ThrottlePolicy = .init(),
        feed: FeedPolicy = .init(),
        mail: MailSettings = .init(),
        contact: ContactPolicy = .init(),
        maxBodyBytes: Int = 1 << 20,
        forwardedForHops: Int = 0,
        logLevel: String = "info"
    ) {
        self.host = host
        self.port = port
        self.databaseURL = databaseURL
        self.dataDirectory = dataDirectory
        self.databasePoolSize = databasePoolSize
        self.hashing = hashing
        self.sessions = sessions
        self.throttles = throttles
        self.feed = feed
        self.mail = mail
        self.contact = contact
        self.maxBodyBytes = maxBodyBytes
        self.forwardedForHops = forwardedForHops
        self.logLevel = logLevel
    }

    /// The nearby statements' pool when not set: a quarter of the main pool, at least two; and
    /// beside the embedded cluster, which shares this machine's CPUs, at most two for each event
    /// loop (one loop per CPU; the pool is split among the loops, `GenericPlanPool`). Those
    /// statements keep PostgreSQL's CPU busy, so more of them at once only adds switching between
    /// its backends. On two CPUs, in alternating ad hoc `wrk` rounds of nearby pages, four
    /// served 950–1,290 pages a second (three of four rounds above 1,270), three 1,090–1,220,
    /// six 940–1,240 (2026-11-27).
    var genericPoolSize: Int {
        if let databaseGenericPoolSize { return databaseGenericPoolSize }
        let quarter = max(2, databasePoolSize / 4)
        guard databaseURL == nil else { return quarter }
        return max(2, min(quarter, 2 * LoopExecutor.loops.count))
    }

    /// `BOOKWORM_TRUST_FORWARDED_FOR`: false, true (one proxy), or how many proxies append to it.
    static func forwardedForHops(_ reader: EnvironmentReader) throws -> Int {
        let name = "BOOKWORM_TRUST_FORWARDED_FOR"
        if let raw = reader.string(name), let hops = Int(raw) {
            guard (0...10).contains(hops) else { throw ConfigError(variable: name, message: "expected true, false or 0 to 10 proxies, got '\(raw)'") }
            return hops
        }
        return try reader.bool(name) == true ? 1 : 0
    }

    /// Reads the process environment; a malformed value is an error naming the variable.
    package static func fromEnvironment(_ env: [String: String] = ProcessInfo.processInfo.environment) throws -> Config {
        let reader = EnvironmentReader(env: env)
        let defaults = Config()
        var config = Config()
        config.host = reader.string("BOOKWORM_HOST") ?? defaults.host
        config.port = try reader.int("BOOKWORM_PORT", range: 0...65535) ?? defaults.port
        config.databaseURL = reader.string("DATABASE_URL")
        config.databaseReadURL = reader.string("DATABASE_READ_URL")
        config.dataDirectory = reader.string("BOOKWORM_DATA_DIR") ?? defaults.dataDirectory
        config.databasePoolSize = try reader.int("BOOKWORM_DB_POOL_SIZE", range: 1...1000) ?? defaults.databasePoolSize
        config.databaseGenericPoolSize = try reader.int("BOOKWORM_DB_GENERIC_POOL_SIZE", range: 1...1000)
        config.databaseIdleTimeout = try reader.int("BOOKWORM_DB_IDLE_SECONDS", range: 1...300).map { .seconds($0) }
            ?? defaults.databaseIdleTimeout
        config.databaseDeadlines = try DatabaseDeadlines(
            acquire: reader.int("BOOKWORM_DB_ACQUIRE_TIMEOUT_MS", range: 50...600_000).map { .milliseconds($0) }
                ?? defaults.databaseDeadlines.acquire,
            statement: reader.int("BOOKWORM_DB_STATEMENT_TIMEOUT_MS", range: 50...3_600_000).map { .milliseconds($0) }
                ?? defaults.databaseDeadlines.statement
        )
        config.hashing = try PasswordHasher.Settings(
            memoryLimitBytes: reader.int("BOOKWORM_ARGON2_MEMORY_KIB", range: 8...4_194_304).map { $0 * 1024 }
                ?? defaults.hashing.memoryLimitBytes,
            operationsLimit: reader.int("BOOKWORM_ARGON2_ITERATIONS", range: 1...100) ?? defaults.hashing.operationsLimit,
            concurrency: reader.int("BOOKWORM_HASH_CONCURRENCY", range: 1...256) ?? defaults.hashing.concurrency,
            queueLimit: reader.int("BOOKWORM_HASH_QUEUE", range: 0...100_000) ?? defaults.hashing.queueLimit
        )
        if let concurrency = try reader.int("BOOKWORM_IMAGE_CONCURRENCY", range: 1...256) { config.photos = .init(concurrency: concurrency) }
        config.photos.queueLimit = try reader.int("BOOKWORM_IMAGE_QUEUE", range: 0...10_000) ?? config.photos.queueLimit
        config.live.maxStreams = try reader.int("BOOKWORM_MAX_STREAMS", range: 0...1_000_000) ?? config.live.maxStreams
        config.live.heartbeatSeconds = try reader.int("BOOKWORM_EVENTS_HEARTBEAT_SECONDS", range: 1...3600) ?? config.live.heartbeatSeconds
        config.sessions = try SessionPolicy(
            idleTimeout: reader.int("BOOKWORM_SESSION_IDLE_DAYS", range: 1...3650).map { Double($0) * 86400 }
                ?? defaults.sessions.idleTimeout,
            absoluteTimeout: reader.int("BOOKWORM_SESSION_MAX_DAYS", range: 1...3650).map { Double($0) * 86400 }
                ?? defaults.sessions.absoluteTimeout
        )
        config.throttles = try ThrottlePolicy(
            loginFailures: reader.int("BOOKWORM_LOGIN_MAX_FAILURES", range: 1...10_000) ?? defaults.throttles.loginFailures,
            loginWindow: reader.int("BOOKWORM_LOGIN_WINDOW_SECONDS", range: 1...86_400).map(Double.init)
                ?? defaults.throttles.loginWindow,
            registrations: reader.int("BOOKWORM_REGISTER_MAX_PER_HOUR", range: 1...100_000) ?? defaults.throttles.registrations,
            registrationWindow: defaults.throttles.registrationWindow
        )
        config.feed.postsPerHour = try reader.int("BOOKWORM_POSTS_PER_HOUR", range: 1...100_000) ?? defaults.feed.postsPerHour
        config.mail = try MailSettings.fromEnvironment(reader, defaults: defaults.mail)
        config.push = try PushSettings.fromEnvironment(reader)
        config.contact.perHour = try reader.int("BOOKWORM_CONTACT_PER_HOUR", range: 1...100_000) ?? defaults.contact.perHour
        config.contact.perRecipientPerDay = try reader.int("BOOKWORM_CONTACT_PER_RECIPIENT_PER_DAY", range: 1...1000)
            ?? defaults.contact.perRecipientPerDay
        config.notify.perRecipientPerDay = try reader.int("BOOKWORM_NOTIFY_PER_RECIPIENT_PER_DAY", range: 1...10_000)
            ?? defaults.notify.perRecipientPerDay
        config.notify.perSenderPerHour = try reader.int("BOOKWORM_NOTIFY_PER_SENDER_PER_HOUR", range: 1...100_000)
            ?? defaults.notify.perSenderPerHour
        config.trades.requestedDays = try reader.int("BOOKWORM_TRADE_REQUEST_DAYS", range: 1...365).map(Double.init)
            ?? defaults.trades.requestedDays
        config.trades.acceptedDays = try reader.int("BOOKWORM_TRADE_ACCEPTED_DAYS", range: 1...365).map(Double.init)
            ?? defaults.trades.acceptedDays
        config.wishes.digestHour = try reader.int("BOOKWORM_ALERT_DIGEST_HOUR", range: 0...23) ?? defaults.wishes.digestHour
        config.sync.tombstoneDays = try reader.int("BOOKWORM_SYNC_TOMBSTONE_DAYS", range: 1...3650) ?? defaults.sync.tombstoneDays
        config.idempotencyHours = try reader.int("BOOKWORM_IDEMPOTENCY_HOURS", range: 1...720) ?? defaults.idempotencyHours
        config.erasure.usernameHoldDays = try reader.int("BOOKWORM_USERNAME_HOLD_DAYS", range: 0...3650)
            ?? defaults.erasure.usernameHoldDays
        config.reports.hideThreshold = try reader.int("BOOKWORM_REPORT_HIDE_THRESHOLD", range: 1...1000)
            ?? defaults.reports.hideThreshold
        config.reports.minAccountHours = try reader.int("BOOKWORM_REPORT_MIN_ACCOUNT_HOURS", range: 0...87_600)
            ?? defaults.reports.minAccountHours
        config.google.clientIDs = (reader.string("GOOGLE_CLIENT_IDS") ?? "").split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        config.google.jwksURL = try reader.url("GOOGLE_JWKS_URL", schemes: ["https", "http"]) ?? defaults.google.jwksURL
        config.uploadBytesPerSecond = try reader.int("BOOKWORM_UPLOAD_MIB_PER_SECOND", range: 0...100_000).map { $0 << 20 }
            ?? defaults.uploadBytesPerSecond
        config.imports.restPercent = try reader.int("BOOKWORM_IMPORT_REST_PERCENT", range: 0...1000) ?? defaults.imports.restPercent
        let idle = try reader.bool("BOOKWORM_BACKGROUND_IDLE") ?? true
        (config.photos.idle, config.imports.readsIdle) = (idle, idle)
        config.maxBodyBytes = try reader.int("BOOKWORM_MAX_BODY_BYTES", range: 1024...(1 << 30)) ?? defaults.maxBodyBytes
        config.connections = try ConnectionPolicy(
            idleTimeoutSeconds: reader.int("BOOKWORM_IDLE_TIMEOUT_SECONDS", range: 1...3600) ?? defaults.connections.idleTimeoutSeconds,
            maxConnections: reader.int("BOOKWORM_MAX_CONNECTIONS", range: 1...1_000_000) ?? defaults.connections.maxConnections
        )
        config.forwardedForHops = try Self.forwardedForHops(reader)
        config.crossOrigin = try CrossOriginPolicy(variable: "BOOKWORM_CORS_ORIGINS", value: reader.string("BOOKWORM_CORS_ORIGINS"))
        config.logLevel = reader.string("LOG_LEVEL") ?? defaults.logLevel
        config.metricsHost = reader.string("BOOKWORM_METRICS_HOST") ?? defaults.metricsHost
        config.metricsPort = try reader.int("BOOKWORM_METRICS_PORT", range: 1...65535)
        config.shutdownDrainSeconds = Double(try reader.int("BOOKWORM_SHUTDOWN_DRAIN_SECONDS", range: 0...3600) ?? 5)
        if let format = reader.string("BOOKWORM_LOG_FORMAT") {
            guard let parsed = LogFormat(rawValue: format) else {
                throw ConfigError(variable: "BOOKWORM_LOG_FORMAT", message: "expected text or json, got '\(format)'")
            }
            config.logFormat = parsed
        }
        return config
    }
}

/// How the server writes its log lines.
package enum LogFormat: String, Sendable {
    case text, json
}

extension Config {
    var mailTemplates: MailTemplates { MailTemplates(from: mail.from, publicBaseURL: mail.publicBaseURL, clock: clock) }

    func pushQueue(client: Database, logger: Logger) -> PushQueue {
        PushQueue(client: client, settings: push, clock: clock, logger: logger)
    }

    func idempotencyStore(client: Database, logger: Logger) -> IdempotencyStore {
        IdempotencyStore(client: client, clock: clock, hours: idempotencyHours, logger: logger)
    }

    /// The trades' use cases, as the routes, the job runner and the moderation commands each build them.
    func tradesService(client: Database, logger: Logger) -> TradesService {
        TradesService(client: client, outbox: OutboxStore(client: client, logger: logger, clock: clock),
                      push: pushQueue(client: client, logger: logger), templates: mailTemplates,
                      policy: trades, notify: notify, clock: clock, logger: logger)
    }
}
