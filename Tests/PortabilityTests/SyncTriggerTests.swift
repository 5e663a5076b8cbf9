import Foundation
import Logging
import PostgresNIO
import Synchronization
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// The triggers that feed sync and the alert fan-out, as an import's chunk meets them.
@Suite struct SyncTriggerTests {
    /// An import's chunk inserts its copies and readings in one statement each (migration 0041
    /// logs them per statement): each row is logged for sync in its transaction, each available
    /// copy has its alerts queued, the owner is told once a transaction, and a statement that
    /// inserts nothing tells no one anything.
    @Test func rowsInsertedByOneStatementAreEachLoggedAndQueuedAndAnEmptyInsertTellsNoOne() async throws {
        try await withApp { app in
            let me = try await app.registerTrader()
            let user = try #require(UUID(uuidString: me.id))
            var listed: [UUID] = []
            for title in ["One", "Two", "Three"] {
                listed.append(try #require(UUID(uuidString: (try await app.addCopy(me.token, title: title)["book"] as? [String: Any])?["id"] as? String ?? "")))
            }
            let books = listed
            let logger = Logger(label: "test")
            func count(_ query: PostgresQuery) async throws -> Int64? {
                try await app.db.query(query, logger: logger).decode(Int64.self).first { _ in true }
            }
            try await app.db.client.withConnection { listener in
                let notifications = try await listener.listen("events")
                let heard = Mutex<[String]>([])
                let hearing = Task { for try await notification in notifications { heard.withLock { $0.append(notification.payload) } } }
                defer { hearing.cancel() }
                // Three available copies and a reserved one, in one statement; twice (the second inserts nothing).
                func insertCopies() async throws -> [(UUID, String, String)] {
                    var rows: [(UUID, String, String)] = []
                    for try await row in try await app.db.query("""
                        INSERT INTO copies (owner_id, book_id, condition, status, import_key)
                        SELECT \(user), \(books[0]), 'good', CASE n WHEN 4 THEN 'reserved' ELSE 'available' END, 'chunk:' || n
                        FROM generate_series(1, 4) AS n
                        ON CONFLICT (owner_id, import_key) WHERE import_key IS NOT NULL DO NOTHING
                        RETURNING id, status, pg_current_xact_id()::text
                        """, logger: logger).decode((UUID, String, String).self) { rows.append(row) }
                    return rows
                }
                let made = try await insertCopies()
                let copyXID = made.first?.2 ?? ""
                #expect(made.count == 4 && Set(made.map(\.2)).count == 1)
                #expect(try await count("""
                    SELECT count(*)::int8 FROM sync_changes WHERE user_id = \(user) AND kind = 'copy'
                      AND object_id = ANY(\(made.map(\.0))) AND op = 'upsert' AND xid::text = \(copyXID)
                    """) == 4)
                let available = made.filter { $0.1 == "available" }.map(\.0.apiString)
                #expect(try await count("SELECT count(*)::int8 FROM jobs WHERE kind = 'alerts.copy' AND key = ANY(\(made.map(\.0.apiString)))") == 3)
                #expect(try await count("SELECT count(*)::int8 FROM jobs WHERE kind = 'alerts.copy' AND key = ANY(\(available))") == 3)
                #expect(try await insertCopies().isEmpty)
                var readingXID = ""
                for try await xid in try await app.db.query("""
                    INSERT INTO readings (user_id, book_id, state, private, created_at, updated_at)
                    SELECT \(user), book, 'reading', false, now(), now() FROM unnest(\(books)) AS book
                    RETURNING pg_current_xact_id()::text
                    """, logger: logger).decode(String.self) { readingXID = xid }
                #expect(try await count("""
                    SELECT count(*)::int8 FROM sync_changes WHERE user_id = \(user) AND kind = 'reading'
                      AND object_id = ANY(\(books)) AND op = 'upsert' AND xid::text = \(readingXID)
                    """) == 3)
                // Notifications arrive in commit order: once the marker is heard, every earlier one has come.
                try await app.db.query("SELECT pg_notify('events', 'marker')", logger: logger)
                try #require(try await eventually { heard.withLock { $0.contains("marker") } })
                let hints = Set(["h \(copyXID)", "h \(readingXID)"])
                #expect(heard.withLock { $0.filter { !hints.contains($0) } }
                        == ["s \(user.apiString) \(copyXID)", "s \(user.apiString) \(readingXID)", "marker"])
            }
        }
    }
}
