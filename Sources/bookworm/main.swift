import ArgumentParser

import BookwormApp
import BookwormCore
import Exchange
import Foundation
import Logging


@main
struct BookwormCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bookworm",
        abstract: "The Bookworm book-exchange backend.",
        subcommands: [Serve.self, Worker.self, Migrate.self, Outbox.self, Reports.self, Users.self, Audit.self, Seed.self, Trades.self, Push.self, Health.self],
        defaultSubcommand: Serve.self
    )
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Serve the HTTP API (configuration from the environment; see README).")

    @Flag(help: "Apply pending migrations before serving.")
    var migrate = false

    @Flag(help: "Do not run the background workers (jobs, pushes, mail) in this process (run `bookworm worker` instead).")
    var noWorker = false

    func run() async throws {
        var config = try loadConfig()
        config.migrateOnStart = migrate
        config.runWorker = !noWorker
        let app = try await buildApplication(config: config)
        try await runServing(app, config: config)
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show, apply or verify database migrations.")

    @Argument(help: "status | up | verify")
    var action: MigrateAction = .status

    func run() async throws {
        let config = try loadConfig()
        let report = try await runMigrateCommand(action, config: config, logger: Logger(label: "bookworm.migrate"))
        print(report)
    }
}

extension MigrateAction: ExpressibleByArgument {}

struct Worker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the background workers (jobs, pushes, mail) without the API (any number may run at once); stops on SIGTERM.")

    func run() async throws {
        try await runWorkerCommand(config: try loadConfig(), logger: Logger(label: "bookworm.worker"))
    }
}

struct Outbox: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The mail queue: stats | list [--status queued|sent|failed] | retry ID | discard ID.")

    @Argument(help: "stats | list | retry | discard") var action: String = "stats"
    @Argument(help: "The message id, for retry and discard.") var id: String?
    @Option(help: "Only messages with this status (list).") var status: String?
    @Option(help: "How many messages to list.") var limit = 50

    func validate() throws {
        guard ["stats", "list", "retry", "discard"].contains(action) else { throw ValidationError("unknown action '\(action)'") }
        if ["retry", "discard"].contains(action), id.flatMap(UUID.init(uuidString:)) == nil {
            throw ValidationError("\(action) needs the message id (a UUID)")
        }
        if let status, !["queued", "sent", "failed"].contains(status) { throw ValidationError("--status is queued, sent or failed") }
        guard (1...10_000).contains(limit) else { throw ValidationError("--limit is 1 to 10000") }
    }

    func run() async throws {
        let config = try loadConfig()
        let parsed: OutboxAction
        switch (action, id.flatMap(UUID.init(uuidString:))) {
        case ("retry", let id?): parsed = .retry(id)
        case ("discard", let id?): parsed = .discard(id)
        case ("list", _): parsed = .list(status: status, limit: limit)
        default: parsed = .stats
        }
        print(try await runOutboxCommand(parsed, config: config, logger: Logger(label: "bookworm.outbox")))
    }
}

struct Seed: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Fill the database with realistic demo data.")

    @Option(help: "Users to create.") var users = 1000
    @Option(help: "Books (editions, with valid ISBNs) to create.") var books = 2000
    @Option(help: "Copies to create, spread over the users and books.") var copies = 10000
    @Option(help: "Feed posts to create, by users with a pin, placed on their default pin.") var posts = 2000

    func validate() throws {
        guard users >= 0, books >= 0, copies >= 0, posts >= 0 else { throw ValidationError("counts must not be negative") }
        guard copies == 0 || (users > 0 && books > 0) else { throw ValidationError("copies need at least one user and one book") }
    }

    func run() async throws {
        let config = try loadConfig()
        let counts = Seeder.Counts(users: users, books: books, copies: copies, posts: posts)
        print(try await runSeedCommand(counts, config: config, logger: Logger(label: "bookworm.seed")))
    }
}

func loadConfig() throws -> Config {
    let config = try Config.fromEnvironment()
    let level = Logger.Level(rawValue: config.logLevel) ?? .info
    let json = config.logFormat == .json
    LoggingSystem.bootstrap { label in
        LineLogHandler(label: label, level: level, format: json ? .json : .text)
    }
    // Before anything makes a metric: requests, jobs and the hashing queue count from the start.
    if config.metricsPort != nil { AppMetrics.bootstrap() }
    return config
}

struct Push: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Push notifications: stats (the queue by provider and status) | test USERNAME (one push to each of their devices, sent now).")

    @Argument(help: "stats | test") var action: String = "stats"
    @Argument(help: "The user, for test.") var username: String?

    func validate() throws {
        guard ["stats", "test"].contains(action) else { throw ValidationError("unknown action '\(action)'") }
        if action == "test", username == nil { throw ValidationError("test needs a USERNAME") }
    }

    func run() async throws {
        let parsed: PushAction = action == "test" ? .test(username: username ?? "") : .stats
        print(try await runPushCommand(parsed, config: try loadConfig(), logger: Logger(label: "bookworm.push")))
    }
}

struct Trades: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The trade state machine as a Markdown table (the one the server runs).")

    @Argument(help: "table") var action: String = "table"

    func validate() throws {
        guard action == "table" else { throw ValidationError("unknown action '\(action)'") }
    }

    func run() async throws {
        print(tradeTransitionTable())
    }
}

/// `bookworm health`: the container's health check. The runtime image has no curl, so the binary
/// asks its own server: exit 0 when `GET /health/ready` on this machine answers 200 within 3 s.
struct Health: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Exit 0 if the server on this machine is ready (GET /health/ready answers 200), else 1.")

    @Option(help: "Port to ask (default: BOOKWORM_PORT, else 8080).") var port: Int?

    func run() throws {
        let port = self.port ?? ProcessInfo.processInfo.environment["BOOKWORM_PORT"].flatMap { Int($0) } ?? 8080
        guard (1...65535).contains(port), HealthProbe.ready(port: port) else { throw ExitCode(1) }
    }
}

/// Runs an admin command and prints its answer; a refusal (unknown user, report already
/// resolved) is one line on standard error and exit status 1.
func runAdmin(_ action: ModerationAction) async throws {
    let config = try loadConfig()
    do {
        print(try await runModerationCommand(action, actor: AdminActor.current(), config: config, logger: Logger(label: "bookworm.admin")))
    } catch let error as AppError {
        FileHandle.standardError.write(Data("error: \(error.message)\n".utf8))
        throw ExitCode(1)
    }
}

struct Reports: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Reports: list [--status open|dismissed|removed|suspended|all] | show ID | resolve ID --action dismiss|remove|suspend [--reason TEXT].")

    @Argument(help: "list | show | resolve") var action: String = "list"
    @Argument(help: "The report id, for show and resolve.") var id: String?
    @Option(help: "Only reports with this status (list; default open).") var status = "open"
    @Option(name: .customLong("action"), help: "dismiss | remove | suspend (resolve).") var resolution: String?
    @Option(help: "Why (resolve); kept in the audit log.") var reason: String?
    @Option(help: "How many reports to list.") var limit = 50

    func validate() throws {
        guard ["list", "show", "resolve"].contains(action) else { throw ValidationError("unknown action '\(action)'") }
        if action != "list", id.flatMap(UUID.init(uuidString:)) == nil { throw ValidationError("\(action) needs the report id (a UUID)") }
        if action == "resolve", resolution.flatMap(ReportAction.init(rawValue:)) == nil {
            throw ValidationError("resolve needs --action dismiss, remove or suspend")
        }
        guard ["open", "dismissed", "removed", "suspended", "all"].contains(status) else {
            throw ValidationError("--status is open, dismissed, removed, suspended or all")
        }
        guard (1...10_000).contains(limit) else { throw ValidationError("--limit is 1 to 10000") }
    }

    func run() async throws {
        switch (action, id.flatMap(UUID.init(uuidString:)), resolution.flatMap(ReportAction.init(rawValue:))) {
        case ("show", let id?, _): try await runAdmin(.showReport(id))
        case ("resolve", let id?, let how?): try await runAdmin(.resolve(id, how, reason: reason))
        default: try await runAdmin(.listReports(status: status == "all" ? nil : status, limit: limit))
        }
    }
}

struct Users: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Accounts: show USERNAME | suspend USERNAME [--reason TEXT] | unsuspend USERNAME [--reason TEXT].")

    @Argument(help: "show | suspend | unsuspend") var action: String
    @Argument(help: "The username.") var username: String
    @Option(help: "Why; kept in the audit log.") var reason: String?

    func validate() throws {
        guard ["show", "suspend", "unsuspend"].contains(action) else { throw ValidationError("unknown action '\(action)'") }
        if let reason, reason.count > 500 { throw ValidationError("--reason is at most 500 characters") }
    }

    func run() async throws {
        switch action {
        case "suspend": try await runAdmin(.suspend(username, reason: reason))
        case "unsuspend": try await runAdmin(.unsuspend(username, reason: reason))
        default: try await runAdmin(.showUser(username))
        }
    }
}

struct Audit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The admin audit log, newest first: list [--limit N].")

    @Argument(help: "list") var action: String = "list"
    @Option(help: "How many entries.") var limit = 50

    func validate() throws {
        guard action == "list" else { throw ValidationError("unknown action '\(action)'") }
        guard (1...10_000).contains(limit) else { throw ValidationError("--limit is 1 to 10000") }
    }

    func run() async throws {
        try await runAdmin(.audit(limit: limit))
    }
}
