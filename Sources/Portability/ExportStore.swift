import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// SQL for exports: the request (at most one a day), what goes in the archive, the archive.
struct ExportStore: Sendable {
    let client: Database
    let logger: Logger

    /// The new export and its job; or, when the user asked for one less than a day ago, when
    /// that one was asked for (the user row's lock makes the check race-free).
    func create(user: UUID, now: Date, on connection: PostgresConnection) async throws -> ExportRequest {
        try await connection.query("SELECT 1 FROM users WHERE id = \(user) FOR UPDATE", logger: logger)
        let recent = try await connection.query("""
            SELECT max(created_at) FROM exports WHERE user_id = \(user) AND created_at > \(now) - interval '1 day'
            """, logger: logger)
        for try await last in recent.decode(Date?.self) { if let last { return .tooSoon(last: last) } }
        let rows = try await connection.query("INSERT INTO exports (user_id, created_at) VALUES (\(user), \(now)) RETURNING id", logger: logger)
        for try await id in rows.decode(UUID.self) {
            try await JobStore.enqueue(kind: ExportJob.jobKind, key: id.apiString, on: connection, logger: logger)
            return .created(id)
        }
        throw AppError.unavailable("export insert returned no row")
    }

    func view(_ id: UUID, user: UUID) async throws -> ExportView? {
        let rows = try await client.query("""
            SELECT id, status, size, created_at, finished_at, expires_at, archive IS NOT NULL
            FROM exports WHERE id = \(id) AND user_id = \(user)
            """, logger: logger)
        for try await row in rows.decode((UUID, String, Int64?, Date, Date?, Date?, Bool).self) {
            return ExportView(id: row.0, status: row.1, size: row.2, createdAt: row.3, finishedAt: row.4, expiresAt: row.5, available: row.6)
        }
        return nil
    }

    /// The archive while it may still be downloaded.
    func archive(_ id: UUID, user: UUID, now: Date) async throws -> ArchiveLookup {
        let rows = try await client.query("""
            SELECT archive, expires_at FROM exports WHERE id = \(id) AND user_id = \(user) AND status = 'done'
            """, logger: logger)
        for try await (archive, expires) in rows.decode((ByteBuffer?, Date?).self) {
            guard let archive, let expires, expires > now else { return .expired }
            return .ready(archive)
        }
        return .missing
    }

    /// Who asked, if the export still waits to be built (claiming it as running).
    func claim(_ id: UUID) async throws -> UUID? {
        let rows = try await client.query("""
            UPDATE exports SET status = 'running' WHERE id = \(id) AND status IN ('queued', 'running') RETURNING user_id
            """, logger: logger)
        for try await user in rows.decode(UUID.self) { return user }
        return nil
    }

    /// Every object of the user, by kind.
    func objects(of user: UUID) async throws -> [String: [UUID]] {
        let rows = try await client.query("""
            SELECT 'pin', id FROM pins WHERE owner_id = \(user)
            UNION ALL SELECT 'copy', id FROM copies WHERE owner_id = \(user)
            UNION ALL SELECT 'reading', book_id FROM readings WHERE user_id = \(user)
            UNION ALL SELECT 'wish', id FROM wishes WHERE user_id = \(user)
            UNION ALL SELECT 'trade', id FROM trades WHERE requester_id = \(user) OR owner_id = \(user)
            UNION ALL SELECT 'post', id FROM posts WHERE author_id = \(user)
            UNION ALL SELECT 'block', id FROM blocks WHERE blocker_id = \(user)
            """, logger: logger)
        var objects: [String: [UUID]] = [:]
        for try await (kind, id) in rows.decode((String, UUID).self) { objects[kind, default: []].append(id) }
        return objects
    }

    func profile(of user: UUID) async throws -> [String: String?] {
        let rows = try await client.query("""
            SELECT username, email, display_name, bio, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), alerts,
                   array_to_string(push_off, ',')
            FROM users WHERE id = \(user)
            """, logger: logger)
        for try await row in rows.decode((String, String, String?, String?, String, String, String).self) {
            return ["username": row.0, "email": row.1, "display_name": row.2, "bio": row.3, "created_at": row.4, "alerts": row.5,
                    "push_off": row.6]
        }
        return [:]
    }

    /// The user's phones, as `devices.json` holds them.
    func devices(of user: UUID) async throws -> [[String: String]] {
        let rows = try await client.query("""
            SELECT id, platform, environment, token, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
            FROM devices WHERE user_id = \(user) ORDER BY created_at, id
            """, logger: logger)
        var devices: [[String: String]] = []
        for try await row in rows.decode((UUID, String, String, String, String).self) {
            devices.append(["id": row.0.apiString, "platform": row.1, "environment": row.2, "token": row.3, "created_at": row.4])
        }
        return devices
    }

    /// Up to `limit` of the user's copies' photos that are uploads not made anew yet.
    func uploadsWaiting(of user: UUID, limit: Int) async throws -> [String] {
        let rows = try await client.query("""
            SELECT p.id FROM photos p
            WHERE p.bytes IS NOT NULL AND p.id IN (SELECT photo_id FROM copies WHERE owner_id = \(user))
            LIMIT \(limit)
            """, logger: logger)
        var ids: [String] = []
        for try await id in rows.decode(String.self) { ids.append(id) }
        return ids
    }

    /// The photos of the user's copies, each once, as their full-size JPEG (an upload that could
    /// not be made anew is left out: what is exported is what is shown).
    func photos(of user: UUID) async throws -> [(id: String, bytes: ByteBuffer)] {
        let rows = try await client.query("""
            SELECT f.photo_id, f.bytes FROM photo_files f
            WHERE f.size = 'full' AND f.format = 'jpeg'
              AND f.photo_id IN (SELECT photo_id FROM copies WHERE owner_id = \(user) AND photo_id IS NOT NULL)
            """, logger: logger)
        var photos: [(id: String, bytes: ByteBuffer)] = []
        for try await (id, bytes) in rows.decode((String, ByteBuffer).self) { photos.append((id, bytes)) }
        return photos
    }

    func finish(_ id: UUID, archive: Data, now: Date, keep: TimeInterval) async throws {
        try await client.query("""
            UPDATE exports SET status = 'done', archive = \(ByteBuffer(bytes: archive)), size = \(Int64(archive.count)),
                finished_at = \(now), expires_at = \(now.addingTimeInterval(keep))
            WHERE id = \(id)
            """, logger: logger)
    }

    /// Housekeeping: archives past their 72 hours go.
    func dropExpired(now: Date) async throws {
        try await client.query("UPDATE exports SET archive = NULL WHERE archive IS NOT NULL AND expires_at <= \(now)", logger: logger)
    }
}

/// `GET /v1/me/exports/{id}`.
struct ExportView: Encodable, Sendable {
    let id: UUID
    let status: String
    let size: Int64?
    let createdAt: Date
    let finishedAt: Date?
    let expiresAt: Date?
    let available: Bool

    enum CodingKeys: String, CodingKey {
        case id, status, size, createdAt = "created_at", finishedAt = "finished_at", expiresAt = "expires_at", downloadURL = "download_url"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.apiString, forKey: .id)
        try container.encode(status, forKey: .status)
        try container.encode(size, forKey: .size)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(finishedAt, forKey: .finishedAt)
        try container.encode(expiresAt, forKey: .expiresAt)
        try container.encode(status == "done" && available ? "/v1/me/exports/\(id.apiString)/archive" : nil, forKey: .downloadURL)
    }
}

enum ExportRequest: Sendable {
    case created(UUID)
    /// The user asked for one less than a day ago, at `last`.
    case tooSoon(last: Date)
}

enum ArchiveLookup: Sendable {
    case ready(ByteBuffer)
    case expired
    case missing
}
