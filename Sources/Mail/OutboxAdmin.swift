import BookwormCore
import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle

package struct OutboxAdmin: Sendable {
    package let client: Database
    package let logger: Logger
    /// The workers' clock: a message queued again is due by the time they claim on.
    let clock: any AppClock

    package init(client: Database, logger: Logger, clock: any AppClock) {
        self.client = client
        self.logger = logger
        self.clock = clock
    }

    package func stats() async throws -> String {
        let now = clock.now()
        let rows = try await client.query("""
            SELECT status, count(*)::int8,
                   count(*) FILTER (WHERE status = 'queued' AND next_attempt_at <= \(now))::int8,
                   count(*) FILTER (WHERE lease_expires_at > \(now))::int8,
                   coalesce(EXTRACT(EPOCH FROM \(now)::timestamptz - min(created_at)), 0)::float8
            FROM outbox_messages GROUP BY status ORDER BY status
            """, logger: logger)
        var table = [["STATUS", "MESSAGES", "DUE NOW", "CLAIMED", "OLDEST"]]
        for try await (status, count, due, claimed, age) in rows.decode((String, Int, Int, Int, Double).self) {
            table.append([status, "\(count)", status == "queued" ? "\(due)" : "-", status == "queued" ? "\(claimed)" : "-", Self.age(age)])
        }
        var suppressed = 0
        for try await count in try await client.query("SELECT count(*)::int8 FROM mail_suppressions", logger: logger).decode(Int.self) {
            suppressed = count
        }
        if table.count == 1 { table.append(["(empty)", "0", "-", "-", "-"]) }
        return TextTable.render(table) + "\nsuppressed addresses: \(suppressed)"
    }

    package func list(status: String?, limit: Int) async throws -> String {
        let rows = try await client.query("""
            SELECT id, status, kind, recipient, attempts, created_at, next_attempt_at, coalesce(last_error, '')
            FROM outbox_messages
            WHERE \(status)::text IS NULL OR status = \(status)
            ORDER BY created_at DESC, id DESC
            LIMIT \(limit)
            """, logger: logger)
        let formatter = ISO8601DateFormatter()
        var table = [["ID", "STATUS", "KIND", "TO", "TRIES", "CREATED", "NEXT TRY", "LAST ERROR"]]
        for try await (id, state, kind, to, attempts, created, next, error) in rows.decode((UUID, String, String, String, Int, Date, Date, String).self) {
            table.append([id.apiString, state, kind, Self.mask(to), "\(attempts)", formatter.string(from: created),
                          state == "queued" ? formatter.string(from: next) : "-", String(error.prefix(60))])
        }
        return TextTable.render(table)
    }

    /// Queues a failed (or waiting) message again, due now, with a fresh set of attempts.
    package func retry(_ id: UUID) async throws -> String {
        let now = clock.now()
        let rows = try await client.query("""
            UPDATE outbox_messages SET status = 'queued', attempts = 0, next_attempt_at = \(now), lease_owner = NULL,
                   lease_expires_at = NULL, updated_at = \(now)
            WHERE id = \(id) AND status <> 'sent' AND content <> ''
            RETURNING recipient, EXISTS (SELECT 1 FROM mail_suppressions s WHERE s.address = lower(recipient))
            """, logger: logger)
        for try await (_, suppressed) in rows.decode((String, Bool).self) {
            return "Queued \(id.apiString) again." + (suppressed ? " Its address is suppressed, so it will fail again." : "")
        }
        throw AppError.notFound("No unsent message with id \(id.apiString) that still holds its content")
    }

    package func discard(_ id: UUID) async throws -> String {
        let now = clock.now()
        let rows = try await client.query("""
            UPDATE outbox_messages SET status = 'failed', last_error = 'discarded by an operator', lease_owner = NULL,
                   lease_expires_at = NULL, updated_at = \(now)
            WHERE id = \(id) AND status = 'queued' RETURNING id
            """, logger: logger)
        for try await _ in rows { return "Discarded \(id.apiString)." }
        throw AppError.notFound("No queued message with id \(id.apiString)")
    }

    /// `a***@example.org`: enough to recognise, not enough to harvest.
    static func mask(_ address: String) -> String {
        guard let at = address.lastIndex(of: "@"), at > address.startIndex else { return "***" }
        return String(address[address.startIndex]) + "***" + address[at...]
    }

    static func age(_ seconds: Double) -> String {
        switch seconds {
        case ..<120: "\(Int(seconds)) s"
        case ..<7200: "\(Int(seconds / 60)) min"
        case ..<172_800: "\(Int(seconds / 3600)) h"
        default: "\(Int(seconds / 86400)) d"
        }
    }
}
