import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// Photo bytes in PostgreSQL, one row per distinct content (keyed by SHA-256).
package struct PhotosStore: Sendable {
    package let client: Database
    package let logger: Logger

    package init(client: Database, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Stores the bytes unless identical bytes are already there; returns the id. The
    /// conflict path still touches the row so it stays locked until our transaction ends and a
    /// concurrent orphan clean-up cannot remove it in between.
    package func put(_ bytes: ByteBuffer, contentType: String, on connection: PostgresConnection) async throws -> String {
        let id = Digest.hex(Digest.sha256(bytes.readableBytesView))
        try await connection.query("""
            INSERT INTO photos (id, content_type, bytes) VALUES (\(id), \(contentType), \(bytes))
            ON CONFLICT (id) DO UPDATE SET content_type = EXCLUDED.content_type
            """, logger: logger)
        return id
    }

    package func get(_ id: String) async throws -> (contentType: String, bytes: ByteBuffer)? {
        let rows = try await client.query("SELECT content_type, bytes FROM photos WHERE id = \(id)", logger: logger)
        for try await (type, bytes) in rows.decode((String, ByteBuffer).self) { return (type, bytes) }
        return nil
    }

    /// Removes a photo no copy points at any more. The row lock on the photo makes a racing
    /// copy that is about to point at it wait, and the foreign key stops a wrong delete.
    func deleteIfOrphaned(_ id: String, on connection: PostgresConnection) async throws {
        try await connection.query("""
            DELETE FROM photos p WHERE p.id = \(id) AND NOT EXISTS (SELECT 1 FROM copies c WHERE c.photo_id = p.id)
            """, logger: logger)
    }
}
