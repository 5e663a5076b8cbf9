import Foundation
import Logging
import PostgresNIO

package struct Migration: Sendable, Equatable {
    package let version: Int
    package let name: String
    package let sql: String
    package var checksum: String { Digest.sha256Hex(sql) }
}

package struct MigrationState: Sendable {
    package let version: Int
    package let name: String
    package let appliedAt: Date?
    /// nil when not applied; false when the file changed after it was applied.
    package let checksumMatches: Bool?
    package let knownToThisBinary: Bool
}

package enum MigrationError: Error, CustomStringConvertible {
    case badFileName(String)
    case duplicateVersion(Int)
    case failed(version: Int, name: String, message: String)
    case checksumMismatch([String])
    case pending([String])
    case missingResources

    package var description: String {
        switch self {
        case .badFileName(let name): "migration file '\(name)' must be named NNNN_name.sql"
        case .duplicateVersion(let version): "two migration files have version \(version)"
        case .failed(let version, let name, let message):
            "migration \(String(format: "%04d", version))_\(name) failed and was rolled back: \(message)"
        case .checksumMismatch(let names): "applied migrations changed since they ran: \(names.joined(separator: ", "))"
        case .pending(let names):
            "pending migrations: \(names.joined(separator: ", ")); run `bookworm migrate up` or start with --migrate"
        case .missingResources: "the migrations bundled with this binary could not be found"
        }
    }
}

/// Applies `Migrations/*.sql` in order under an advisory lock, one transaction per file,
/// recording each file's SHA-256 so `verify` can tell when an applied file was edited.
package struct Migrator: Sendable {
    let migrations: [Migration]
    /// Arbitrary but fixed: every Bookworm process agrees on it, nothing else uses it.
    static let lockKey: Int64 = 0x426f_6f6b_776f_726d

    package init(migrations: [Migration]) { self.migrations = migrations.sorted { $0.version < $1.version } }

    /// The SQL files carried inside the binary's resource bundle.
    package static func bundled() throws -> Migrator {
        guard let url = Bundle.module.url(forResource: "Migrations", withExtension: nil) else {
            throw MigrationError.missingResources
        }
        return try Migrator(directory: url)
    }

    package init(directory: URL) throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".sql") }
        var seen = Set<Int>()
        var loaded: [Migration] = []
        for file in files {
            let stem = file.dropLast(4)
            let parts = stem.split(separator: "_", maxSplits: 1)
            guard parts.count == 2, let version = Int(parts[0]), version > 0 else { throw MigrationError.badFileName(file) }
            guard seen.insert(version).inserted else { throw MigrationError.duplicateVersion(version) }
            let sql = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            loaded.append(Migration(version: version, name: String(parts[1]), sql: sql))
        }
        self.init(migrations: loaded)
    }

    package func status(client: PostgresClient, logger: Logger) async throws -> [MigrationState] {
        let applied = try await appliedRows(client: client, logger: logger)
        var states = migrations.map { migration -> MigrationState in
            let row = applied[migration.version]
            return MigrationState(version: migration.version, name: migration.name, appliedAt: row?.appliedAt,
                                  checksumMatches: row.map { $0.checksum == migration.checksum }, knownToThisBinary: true)
        }
        let known = Set(migrations.map(\.version))
        for (version, row) in applied where !known.contains(version) {
            states.append(MigrationState(version: version, name: row.name, appliedAt: row.appliedAt,
                                         checksumMatches: nil, knownToThisBinary: false))
        }
        return states.sorted { $0.version < $1.version }
    }

    package func pending(client: PostgresClient, logger: Logger) async throws -> [Migration] {
        let applied = try await appliedRows(client: client, logger: logger)
        return migrations.filter { applied[$0.version] == nil }
    }

    /// Throws when an applied file's checksum no longer matches the file.
    package func verify(client: PostgresClient, logger: Logger) async throws {
        let changed = try await status(client: client, logger: logger)
            .filter { $0.checksumMatches == false }
            .map { String(format: "%04d_%@", $0.version, $0.name) }
        if !changed.isEmpty { throw MigrationError.checksumMismatch(changed) }
    }

    /// Applies every pending file; returns those it applied. Safe to run from several
    /// processes at once: the advisory lock serialises them and the loser finds nothing to do.
    @discardableResult
    package func up(client: PostgresClient, logger: Logger) async throws -> [Migration] {
        try await client.withConnection { connection in
            try await connection.query("SELECT pg_advisory_lock(\(Self.lockKey))", logger: logger)
            do {
                let applied = try await applyPending(on: connection, logger: logger)
                try await connection.query("SELECT pg_advisory_unlock(\(Self.lockKey))", logger: logger)
                return applied
            } catch {
                _ = try? await connection.query("SELECT pg_advisory_unlock(\(Self.lockKey))", logger: logger)
                throw error
            }
        }
    }

    private func applyPending(on connection: PostgresConnection, logger: Logger) async throws -> [Migration] {
        try await connection.query(Self.createTable, logger: logger)
        let rows = try await connection.query("SELECT version FROM schema_migrations", logger: logger)
        var done = Set<Int>()
        for try await version in rows.decode(Int.self) { done.insert(version) }
        var applied: [Migration] = []
        for migration in migrations where !done.contains(migration.version) {
            try await apply(migration, on: connection, logger: logger)
            logger.info("migration applied", metadata: ["version": "\(migration.version)", "name": "\(migration.name)"])
            applied.append(migration)
        }
        return applied
    }

    private func apply(_ migration: Migration, on connection: PostgresConnection, logger: Logger) async throws {
        do {
            try await connection.withTransaction(logger: logger) { connection in
                for statement in SQLScript.statements(migration.sql) {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.query("""
                    INSERT INTO schema_migrations (version, name, checksum)
                    VALUES (\(migration.version), \(migration.name), \(migration.checksum))
                    """, logger: logger)
            }
        } catch let error as PostgresTransactionError {
            let inner = error.closureError ?? error.commitError ?? error.beginError ?? error
            let message = (inner as? PSQLError)?.serverMessage ?? String(reflecting: inner)
            throw MigrationError.failed(version: migration.version, name: migration.name, message: message)
        }
    }

    private struct AppliedRow { let name: String; let checksum: String; let appliedAt: Date }

    private func appliedRows(client: PostgresClient, logger: Logger) async throws -> [Int: AppliedRow] {
        let exists = try await client.query("SELECT to_regclass('schema_migrations') IS NOT NULL", logger: logger)
        var tableExists = false
        for try await value in exists.decode(Bool.self) { tableExists = value }
        guard tableExists else { return [:] }
        let rows = try await client.query("SELECT version, name, checksum, applied_at FROM schema_migrations", logger: logger)
        var result: [Int: AppliedRow] = [:]
        for try await row in rows.decode((Int, String, String, Date).self) {
            result[row.0] = AppliedRow(name: row.1, checksum: row.2, appliedAt: row.3)
        }
        return result
    }

    static let createTable: PostgresQuery = """
        CREATE TABLE IF NOT EXISTS schema_migrations (
            version integer PRIMARY KEY,
            name text NOT NULL,
            checksum text NOT NULL,
            applied_at timestamptz NOT NULL DEFAULT now()
        )
        """
}
