import Logging
import PostgresNIO
import Synchronization

/// PostgresNIO (1.33.2) keeps a prepared statement's failed preparation for the connection's
/// lifetime and answers every later run of it there with the same error, without asking
/// PostgreSQL again (`PreparedStatementMemoryTests` shows it, and fails once that changes).
/// Preparing fails for reasons that pass: a table locked past `statement_timeout` (a deploy's
/// migration), a transaction already aborted, a deadlock. So a connection whose prepared
/// statement failed in such a way is marked, and `Database.openConnection` closes it when it is
/// next leased, taking another. Not at once: the caller may still end its transaction on it,
/// and a statement on a closed connection is never answered. A keyed write's transaction
/// (`HeldTransaction`) keeps its connection to the end, so a deadlock met while preparing
/// fails that request however often the conflict is retried; the next request is served.
/// Errors of statements already prepared mark too (PostgresNIO does not say which it was):
/// under statement timeouts the pool opens connections anew, a few milliseconds each, which
/// `bookworm_db_connections_replaced_total` counts.
package enum FailedPreparation {
    private final class Weak: Sendable {
        weak let connection: PostgresConnection?
        init(_ connection: PostgresConnection) { self.connection = connection }
    }

    private static let marked = Mutex<[ObjectIdentifier: Weak]>([:])

    /// `run`, a prepared statement's execution on `connection`, marking the connection after
    /// an error that may have come from preparing the statement. The error goes on to the
    /// caller. A first mark is logged here, with the request's logger, so that the notice
    /// carries the request's id (later errors in the same transaction mark it again).
    package static func watching<T>(_ connection: PostgresConnection, logger: Logger, _ run: () async throws -> T) async throws -> T {
        do {
            return try await run()
        } catch where mayHaveFailedPreparing(error) {
            if mark(connection) {
                logger.notice("the connection is replaced at its next lease: a prepared statement on it failed",
                              metadata: ["sqlstate": .string(ServerError.sqlState(of: error) ?? "?"),
                                         "connection": .stringConvertible(connection.id)])
            }
            throw error
        }
    }

    /// Whether `connection` was not marked already.
    @discardableResult
    static func mark(_ connection: PostgresConnection) -> Bool {
        marked.withLock { marked in
            marked = marked.filter { $0.value.connection != nil }
            return marked.updateValue(Weak(connection), forKey: ObjectIdentifier(connection)) == nil
        }
    }

    /// Whether `connection` was marked; the mark goes.
    static func take(_ connection: PostgresConnection) -> Bool {
        marked.withLock { marked in
            guard let entry = marked.removeValue(forKey: ObjectIdentifier(connection)) else { return false }
            return entry.connection === connection
        }
    }

    /// A query cancelled (`statement_timeout`), a lock not available, an aborted transaction, a
    /// deadlock, or a resource PostgreSQL ran out of.
    static func mayHaveFailedPreparing(_ error: any Error) -> Bool {
        guard let state = ServerError.sqlState(of: error) else { return false }
        return ["57014", "55P03", "25P02", "40P01"].contains(state) || state.hasPrefix("53")
    }
}
