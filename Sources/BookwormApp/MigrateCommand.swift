import BookwormCore
import Foundation
import Logging
import PostgresNIO

package enum MigrateAction: String, CaseIterable, Sendable {
    case status, up, verify
}

/// `bookworm migrate status|up|verify`, against `DATABASE_URL` or the embedded cluster.
/// Returns the report to print; throws (non-zero exit) on a failed file or a changed checksum.
package func runMigrateCommand(_ action: MigrateAction, config: Config, logger: Logger) async throws -> String {
    let migrator = try Migrator.bundled()
    return try await withCommandDatabase(config: config, logger: logger) { client in
        switch action {
        case .up:
            let applied = try await migrator.up(client: client, logger: logger)
            return applied.isEmpty ? "Nothing to apply; the schema is current."
                : "Applied:\n" + applied.map { "  \(MigrationReport.fileName($0.version, $0.name))" }.joined(separator: "\n")
        case .verify:
            try await migrator.verify(client: client, logger: logger)
            return "All applied migrations match their files."
        case .status:
            return MigrationReport.table(try await migrator.status(client: client, logger: logger))
        }
    }
}

enum MigrationReport {
    static func fileName(_ version: Int, _ name: String) -> String { String(format: "%04d_%@.sql", version, name) }

    static func table(_ states: [MigrationState]) -> String {
        let formatter = ISO8601DateFormatter()
        var lines = ["VERSION  STATE      APPLIED AT            FILE"]
        for state in states {
            let label: String
            switch (state.appliedAt, state.checksumMatches, state.knownToThisBinary) {
            case (nil, _, _): label = "pending"
            case (_, _, false): label = "unknown"
            case (_, false?, _): label = "CHANGED"
            default: label = "applied"
            }
            let applied = state.appliedAt.map { formatter.string(from: $0) } ?? "-"
            lines.append(String(format: "%-8d %-10@ %-21@ %@", state.version, label, applied, fileName(state.version, state.name)))
        }
        return lines.joined(separator: "\n")
    }
}

/// For admin commands: a running client on `DATABASE_URL`, or on the embedded cluster (started
/// for the command and stopped after it if it was not already running).
package func withCommandDatabase<T: Sendable>(
    config: Config, logger: Logger, poolSize: Int = 2, _ body: @Sendable (PostgresClient) async throws -> T
) async throws -> T {
    var embedded: EmbeddedPostgres?
    let settings: DatabaseSettings
    if let url = config.databaseURL {
        settings = try DatabaseSettings(url: url)
    } else {
        let cluster = EmbeddedPostgres(dataDirectory: config.dataDirectory, logger: logger)
        settings = try await cluster.start(database: "bookworm")
        embedded = cluster
    }
    defer { embedded?.stop() }
    return try await settings.makeClient(poolSize: poolSize, logger: logger).whileRunning(body)
}

/// `bookworm seed`: migrates when on the embedded cluster (as `serve` would), then seeds.
package func runSeedCommand(_ counts: Seeder.Counts, config: Config, logger: Logger) async throws -> String {
    let embedded = config.databaseURL == nil
    return try await withCommandDatabase(config: config, logger: logger) { client in
        let migrator = try Migrator.bundled()
        if embedded { try await migrator.up(client: client, logger: logger) }
        let pending = try await migrator.pending(client: client, logger: logger)
        guard pending.isEmpty else { throw MigrationError.pending(pending.map(\.name)) }
        let start = Date()
        try await Seeder(client: .forAdministration(client), logger: logger).run(counts)
        return String(format: "Seeded %d users, %d books, %d copies, %d posts in %.1f s. Every demo user's password is %@.",
                      counts.users, counts.books, counts.copies, counts.posts, Date().timeIntervalSince(start), Seeder.demoPassword)
    }
}
