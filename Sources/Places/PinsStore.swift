import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// SQL for pins. Every change takes the owner's pins under lock first, so "exactly one default
/// while the user has pins" holds however requests interleave.
package struct PinsStore: Sendable {
    package let client: Database
    package let logger: Logger

    package init(client: Database, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    package static let columns = """
        id, label, kind, latitude, longitude, public_latitude, public_longitude, is_default, created_at, updated_at
        """
    package typealias Row = (UUID, String, String, Double, Double, Double, Double, Bool, Date, Date)

    package static func pin(_ row: Row) -> OwnedPin {
        OwnedPin(id: row.0, label: row.1, kind: row.2, exact: GeoPoint(latitude: row.3, longitude: row.4),
                 publicPoint: GeoPoint(latitude: row.5, longitude: row.6), isDefault: row.7, createdAt: row.8, updatedAt: row.9)
    }

    package func list(ownerID: UUID, on connection: PostgresConnection? = nil) async throws -> [OwnedPin] {
        let query: PostgresQuery = "SELECT \(unescaped: Self.columns) FROM pins WHERE owner_id = \(ownerID) ORDER BY created_at, id"
        let rows = try await client.query(query, on: connection, logger: logger)
        var pins: [OwnedPin] = []
        for try await row in rows.decode(Row.self) { pins.append(Self.pin(row)) }
        return pins
    }

    /// The pins among `ids` that `ownerID` owns, exact points included (delta sync).
    package func owned(_ ids: [UUID], ownerID: UUID) async throws -> [UUID: OwnedPin] {
        guard !ids.isEmpty else { return [:] }
        let query: PostgresQuery = "SELECT \(unescaped: Self.columns) FROM pins WHERE id = ANY(\(ids)) AND owner_id = \(ownerID)"
        var pins: [UUID: OwnedPin] = [:]
        for try await row in try await client.query(query, logger: logger).decode(Row.self) { pins[row.0] = Self.pin(row) }
        return pins
    }

    /// The pin an import made from `key` before, if any.
    func imported(_ key: String, ownerID: UUID, on connection: PostgresConnection) async throws -> UUID? {
        let rows = try await connection.query("SELECT id FROM pins WHERE owner_id = \(ownerID) AND import_key = \(key)", logger: logger)
        for try await id in rows.decode(UUID.self) { return id }
        return nil
    }

    func setImportKey(_ key: String, of id: UUID, on connection: PostgresConnection) async throws {
        try await connection.query("UPDATE pins SET import_key = \(key) WHERE id = \(id)", logger: logger)
    }

    /// Locks and returns the owner's pins (the serialisation point for default changes).
    func lockAll(ownerID: UUID, on connection: PostgresConnection) async throws -> [OwnedPin] {
        let rows = try await connection.query("""
            SELECT \(unescaped: Self.columns) FROM pins WHERE owner_id = \(ownerID) ORDER BY created_at, id FOR UPDATE
            """, logger: logger)
        var pins: [OwnedPin] = []
        for try await row in rows.decode(Row.self) { pins.append(Self.pin(row)) }
        // Users with no pin yet: lock the user row instead, so two first pins cannot race.
        if pins.isEmpty { try await connection.query("SELECT 1 FROM users WHERE id = \(ownerID) FOR UPDATE", logger: logger) }
        return pins
    }

    /// A client-made `id` that another pin has already is `ClientMadeID.conflict`.
    package func insert(id: UUID? = nil, ownerID: UUID, label: String, kind: PinKind, exact: GeoPoint, isDefault: Bool,
                on connection: PostgresConnection) async throws -> UUID {
        let publicPoint = kind.publicPoint(for: exact)
        let rows = try await connection.query("""
            INSERT INTO pins (id, owner_id, label, kind, latitude, longitude, public_latitude, public_longitude, is_default)
            VALUES (coalesce(\(id), gen_random_uuid()), \(ownerID), \(label), \(kind.rawValue), \(exact.latitude), \(exact.longitude),
                    \(publicPoint.latitude), \(publicPoint.longitude), \(isDefault))
            ON CONFLICT (id) DO NOTHING
            RETURNING id
            """, logger: logger)
        for try await id in rows.decode(UUID.self) { return id }
        if id != nil { throw ClientMadeID.conflict }
        throw AppError.unavailable("pin insert returned no row")
    }

    package func update(_ id: UUID, label: String, kind: PinKind, exact: GeoPoint, on connection: PostgresConnection) async throws {
        let publicPoint = kind.publicPoint(for: exact)
        try await connection.query("""
            UPDATE pins SET label = \(label), kind = \(kind.rawValue), latitude = \(exact.latitude), longitude = \(exact.longitude),
                public_latitude = \(publicPoint.latitude), public_longitude = \(publicPoint.longitude), updated_at = clock_timestamp()
            WHERE id = \(id)
            """, logger: logger)
    }

    /// Makes `id` the owner's only default (clearing first: the unique index is not deferred).
    func makeDefault(_ id: UUID?, ownerID: UUID, on connection: PostgresConnection) async throws {
        try await connection.query("""
            UPDATE pins SET is_default = false, updated_at = clock_timestamp()
            WHERE owner_id = \(ownerID) AND is_default AND id IS DISTINCT FROM \(id)
            """, logger: logger)
        if let id {
            try await connection.query("""
                UPDATE pins SET is_default = true, updated_at = clock_timestamp() WHERE id = \(id) AND NOT is_default
                """, logger: logger)
        }
    }

    package func delete(_ id: UUID, on connection: PostgresConnection) async throws {
        try await connection.query("DELETE FROM pins WHERE id = \(id)", logger: logger)
    }

    package func exists(_ id: UUID, on connection: PostgresConnection) async throws -> Bool {
        let rows = try await connection.query("SELECT 1 FROM pins WHERE id = \(id)", logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// Whether `pinID` is one of `ownerID`'s pins (for copies and posts that name a pin).
    package func isOwned(_ pinID: UUID, by ownerID: UUID, on connection: PostgresConnection) async throws -> Bool {
        let rows = try await connection.query("SELECT 1 FROM pins WHERE id = \(pinID) AND owner_id = \(ownerID)", logger: logger)
        for try await _ in rows { return true }
        return false
    }
}
