import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// SQL for `devices`: the phones a user's sessions registered for push.
struct DevicesStore: Sendable {
    let client: Database
    let logger: Logger

    private static let columns = "d.id, d.platform, d.environment, d.created_at, (EXTRACT(EPOCH FROM d.created_at) * 1000000)::int8, d.session_id"
    private typealias Row = (UUID, String, String, Date, Int64, UUID)

    private static func view(_ row: Row, session: UUID) -> DeviceView {
        DeviceView(id: row.0, platform: row.1, environment: row.2, createdAt: row.3, createdMicros: row.4, current: row.5 == session)
    }

    /// Who holds the token now, locked, so two registrations of one phone take turns.
    func holder(platform: String, token: String, on connection: PostgresConnection) async throws -> UUID? {
        let rows = try await connection.query("""
            SELECT user_id FROM devices WHERE platform = \(platform) AND token = \(token) FOR UPDATE
            """, logger: logger)
        for try await user in rows.decode(UUID.self) { return user }
        return nil
    }

    func delete(platform: String, token: String, on connection: PostgresConnection) async throws {
        try await connection.query("DELETE FROM devices WHERE platform = \(platform) AND token = \(token)", logger: logger)
    }

    /// Registers the token for `session`; one registered again by its user keeps its id and place.
    func upsert(user: UUID, session: UUID, platform: String, token: String, environment: String, now: Date,
                on connection: PostgresConnection) async throws -> DeviceView {
        let rows = try await connection.query("""
            INSERT INTO devices AS d (user_id, session_id, platform, environment, token, created_at)
            VALUES (\(user), \(session), \(platform), \(environment), \(token), \(now))
            ON CONFLICT (platform, token) DO UPDATE SET session_id = EXCLUDED.session_id, environment = EXCLUDED.environment
            WHERE d.user_id = EXCLUDED.user_id
            RETURNING \(unescaped: Self.columns)
            """, logger: logger)
        for try await row in rows.decode(Row.self) { return Self.view(row, session: session) }
        throw AppError.unavailable("device upsert returned no row")
    }

    /// Keeps the user's newest `keep` devices.
    func trim(user: UUID, keep: Int, on connection: PostgresConnection) async throws {
        try await connection.query("""
            DELETE FROM devices WHERE id IN (
                SELECT id FROM devices WHERE user_id = \(user) ORDER BY created_at DESC, id DESC OFFSET \(keep))
            """, logger: logger)
    }

    func list(user: UUID, session: UUID, limit: Int, after: Cursor?) async throws -> [DeviceView] {
        let micros = after.map { Int($0.micros) }
        let rows = try await client.query("""
            SELECT \(unescaped: Self.columns) FROM devices d
            WHERE d.user_id = \(user)
              AND (\(micros)::int8 IS NULL OR (d.created_at, d.id) < (timestamptz 'epoch' + \(micros) * interval '1 microsecond', \(after?.id)))
            ORDER BY d.created_at DESC, d.id DESC
            LIMIT \(limit)
            """, logger: logger)
        var views: [DeviceView] = []
        for try await row in rows.decode(Row.self) { views.append(Self.view(row, session: session)) }
        return views
    }

    func delete(_ id: UUID, user: UUID, on connection: PostgresConnection) async throws -> Bool {
        let rows = try await connection.query("DELETE FROM devices WHERE id = \(id) AND user_id = \(user) RETURNING id", logger: logger)
        for try await _ in rows.decode(UUID.self) { return true }
        return false
    }
}
