import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// Photos in PostgreSQL: a row per picture (keyed by the SHA-256 of its full-size JPEG) and its
/// six files. Rows stored before photos were made anew hold their upload in `bytes` until
/// `PhotoRemake` replaces them.
package struct PhotosStore: Sendable {
    package let client: Database
    package let logger: Logger

    package init(client: Database, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Stores the photo unless the same picture is already there; returns its id.
    package func put(_ photo: MadePhoto, on connection: PostgresConnection) async throws -> String {
        let id = photo.id
        let rows = try await connection.query("""
            INSERT INTO photos (id, width, height, blurhash) VALUES (\(id), \(photo.width), \(photo.height), \(photo.blurhash))
            ON CONFLICT (id) DO UPDATE SET width = EXCLUDED.width WHERE false
            RETURNING id
            """, logger: logger)
        // Already there, the row is locked all the same (PostgreSQL locks a conflicting row even
        // when the update's WHERE is false), so an orphan clean-up cannot take it before we commit.
        var inserted = false
        for try await _ in rows { inserted = true }
        guard inserted else { return id }
        for (size, formats) in photo.files {
            for (format, bytes) in formats {
                try await connection.query("""
                    INSERT INTO photo_files (photo_id, size, format, bytes) VALUES (\(id), \(size.rawValue), \(format.rawValue), \(bytes))
                    """, logger: logger)
            }
        }
        return id
    }

    /// One of a photo's files; nil when there is no such photo, or it is an upload not made anew yet
    /// (`uploaded` then says so).
    package func file(_ id: String, size: MadePhoto.Size, format: MadePhoto.Format) async throws -> (bytes: ByteBuffer?, uploaded: Bool) {
        let rows = try await client.query("""
            SELECT (SELECT f.bytes FROM photo_files f WHERE f.photo_id = p.id AND f.size = \(size.rawValue) AND f.format = \(format.rawValue)),
                   p.bytes IS NOT NULL
            FROM photos p WHERE p.id = \(id)
            """, logger: logger)
        for try await (bytes, uploaded) in rows.decode((ByteBuffer?, Bool).self) { return (bytes, uploaded) }
        return (nil, false)
    }

    /// The upload `id` not made anew yet (else the oldest one), unlocked: making it takes long.
    func uploaded(_ id: String?) async throws -> (id: String, bytes: Data)? {
        let rows = try await client.query("""
            SELECT id, bytes FROM photos WHERE bytes IS NOT NULL AND (\(id)::text IS NULL OR id = \(id))
            ORDER BY created_at LIMIT 1
            """, logger: logger)
        for try await (id, bytes) in rows.decode((String, Data).self) { return (id, bytes) }
        return nil
    }

    /// The copies showing `id`, then the photo itself, locked in the order a photo's replacement
    /// takes them (copy, then photo); false when another remake has replaced it meanwhile.
    func lockUploaded(_ id: String, on connection: PostgresConnection) async throws -> Bool {
        try await connection.query("SELECT 1 FROM copies WHERE photo_id = \(id) ORDER BY id FOR UPDATE", logger: logger)
        let rows = try await connection.query("SELECT 1 FROM photos WHERE id = \(id) AND bytes IS NOT NULL FOR UPDATE", logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// The copies showing `old` show `new` instead, and `old` goes (with its upload).
    func replace(_ old: String, with new: String?, on connection: PostgresConnection) async throws {
        try await connection.query("UPDATE copies SET photo_id = \(new), updated_at = clock_timestamp() WHERE photo_id = \(old)",
                                   logger: logger)
        try await connection.query("DELETE FROM photos WHERE id = \(old)", logger: logger)
    }

    /// Removes a photo no copy points at any more. The row lock on the photo makes a racing
    /// copy that is about to point at it wait, and the foreign key stops a wrong delete.
    func deleteIfOrphaned(_ id: String, on connection: PostgresConnection) async throws {
        // Locked first, then deleted by a statement of its own: had the DELETE waited for a
        // transaction that made a copy show the photo, its old snapshot would not see that copy.
        try await connection.query("SELECT 1 FROM photos WHERE id = \(id) FOR UPDATE", logger: logger)
        try await connection.query("""
            DELETE FROM photos p WHERE p.id = \(id) AND NOT EXISTS (SELECT 1 FROM copies c WHERE c.photo_id = p.id)
            """, logger: logger)
    }
}
