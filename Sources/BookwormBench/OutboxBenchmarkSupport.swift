import BookwormCore
import Foundation
import Logging
import Mail
import PostgresNIO

/// What the outbox benchmark needs from the library: queueing many real messages quickly and
/// watching the queue drain.
enum OutboxBenchmarkSupport {
    /// `count` rendered messages to `recipient`, in batches of 5,000 rows per statement.
    static func enqueue(count: Int, recipient: String, client: PostgresClient, logger: Logger) async throws {
        let templates = MailTemplates(from: "Bookworm <bench@bookworm.localhost>", publicBaseURL: "http://127.0.0.1:8080", clock: SystemClock())
        let outbox = OutboxStore(client: .forAdministration(client), logger: logger, clock: SystemClock())
        for start in stride(from: 0, to: count, by: 5000) {
            let messages = (start..<min(count, start + 5000)).map { index in
                templates.contact(to: recipient, recipient: "reader", sender: "bench_\(index)", senderEmail: nil,
                                  bookTitle: "Benchmark Book \(index)", text: "Message \(index): is the copy still available?")
            }
            try await client.transaction(logger: logger) { connection in
                _ = try await outbox.enqueue(messages, kind: .contact, on: connection)
            }
        }
    }

    /// Messages not yet sent or failed.
    static func pending(client: PostgresClient, logger: Logger) async throws -> Int {
        for try await count in try await client.query("SELECT count(*)::int8 FROM outbox_messages WHERE status = 'queued'", logger: logger)
            .decode(Int.self) { return count }
        return 0
    }

    static func sentCount(client: PostgresClient, logger: Logger) async throws -> Int {
        for try await count in try await client.query("SELECT count(*)::int8 FROM outbox_messages WHERE status = 'sent'", logger: logger)
            .decode(Int.self) { return count }
        return 0
    }

    /// The queued messages as a transport sees them, in the order workers claim them.
    static func queued(client: PostgresClient, logger: Logger) async throws -> [OutgoingMessage] {
        var messages: [OutgoingMessage] = []
        let rows = try await client.query("""
            SELECT message_id, envelope_from, recipient, content FROM outbox_messages
            WHERE status = 'queued' ORDER BY next_attempt_at, id
            """, logger: logger)
        for try await (id, from, to, content) in rows.decode((String, String, String, String).self) {
            messages.append(OutgoingMessage(messageID: id, envelopeFrom: from, recipient: to, content: content))
        }
        return messages
    }

    /// Empties the queue between phases.
    static func clear(client: PostgresClient, logger: Logger) async throws {
        // TRUNCATE, not DELETE: each run writes and empties 60,000 rows, and the dead ones left
        // behind slowed the next run's claims threefold (939 against 3,010 msg/s).
        try await client.query("TRUNCATE contact_requests, outbox_messages", logger: logger)
    }
}
