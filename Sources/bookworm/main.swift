import ArgumentParser
import Bookworm
import Foundation
import Logging

@main
struct BookwormCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bookworm",
        abstract: "The Bookworm book-exchange backend.",
        subcommands: [Serve.self, Migrate.self],
        defaultSubcommand: Serve.self
    )
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Serve the HTTP API (configuration from the environment; see README).")

    @Flag(help: "Apply pending migrations before serving.")
    var migrate = false

    func run() async throws {
        var config = try loadConfig()
        config.migrateOnStart = migrate
        let app = try await buildApplication(config: config)
        try await app.runService()
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

func loadConfig() throws -> Config {
    let config = try Config.fromEnvironment()
    let level = Logger.Level(rawValue: config.logLevel) ?? .info
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = level
        return handler
    }
    return config
}
