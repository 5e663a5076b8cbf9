import PostgresNIO

/// Thrown when the pool had only connections that had already closed to give (see
/// `Database.openConnection`), or when a connection failed under a statement (`GatheredRows`).
package struct DatabaseConnectionClosed: Error, CustomStringConvertible {
    package var description: String { "the pool's connection had closed" }
}

/// Errors that mean "the database is away or overloaded", not "this request is wrong": a
/// missed deadline, a dropped or refused connection, the server shutting down or cancelling a
/// statement at its timeout, or out of connection slots.
package enum DatabaseOutage {
    package static func matches(_ error: any Error) -> Bool {
        if error is DatabaseDeadlineExceeded || error is DatabaseConnectionClosed { return true }
        if let error = error as? PostgresTransactionError {
            return [error.beginError, error.closureError, error.commitError].contains { $0.map(matches) ?? false }
        }
        if let error = error as? PostgresError { return matches(older: error) }
        guard let error = error as? PSQLError else { return false }
        switch error.code {
        case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .poolClosed, .queryCancelled:
            return true
        case .server:
            return error.serverInfo?[.sqlState].map(isOutage(sqlState:)) ?? false
        default:
            return false
        }
    }

    /// PostgresNIO's older error, which `GatheredRows` meets: a closed connection, one that broke
    /// (its "protocol" errors include an unclean close), or the server's error.
    private static func matches(older error: PostgresError) -> Bool {
        switch error {
        case .connectionClosed, .protocol: true
        case .server(let message): message.fields[.sqlState].map(isOutage(sqlState:)) ?? false
        }
    }

    /// Connection exceptions, the operator's intervention (shutdown, a cancelled statement), too
    /// many connections.
    private static func isOutage(sqlState state: String) -> Bool {
        state.hasPrefix("08") || state.hasPrefix("57") || state == "53300"
    }
}

/// A transaction PostgreSQL ended because it collided with another: deadlock detected (40P01)
/// or a serialization failure (40001). Nothing of it was kept, and running it again is right.
package enum TransactionConflict {
    package static func matches(_ error: any Error) -> Bool {
        if let error = error as? PostgresTransactionError {
            return [error.beginError, error.closureError, error.commitError].contains { $0.map(matches) ?? false }
        }
        guard let error = error as? PSQLError, error.code == .server, let state = error.serverInfo?[.sqlState] else { return false }
        return state == "40P01" || state == "40001"
    }
}
