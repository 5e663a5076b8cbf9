import PostgresNIO

/// Thrown when the pool had only connections that had already closed to give (see
/// `Database.openConnection`).
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
        // Connection exceptions, the operator's intervention (shutdown, a cancelled statement),
        // too many connections.
        if let state = ServerError.sqlState(of: error) {
            return state.hasPrefix("08") || state.hasPrefix("57") || state == "53300"
        }
        guard let error = error as? PSQLError else { return false }
        switch error.code {
        case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .poolClosed, .queryCancelled:
            return true
        default:
            return false
        }
    }
}

/// A server's error as PostgresNIO reports it.
package enum ServerError {
    /// The error's SQLSTATE when the server sent it.
    package static func sqlState(of error: any Error) -> String? {
        guard let error = error as? PSQLError, error.code == .server else { return nil }
        return error.serverInfo?[.sqlState]
    }
}

/// A transaction PostgreSQL ended because it collided with another: deadlock detected (40P01)
/// or a serialization failure (40001). Nothing of it was kept, and running it again is right.
package enum TransactionConflict {
    package static func matches(_ error: any Error) -> Bool {
        if let error = error as? PostgresTransactionError {
            return [error.beginError, error.closureError, error.commitError].contains { $0.map(matches) ?? false }
        }
        if error is ClientMadeID.Raced { return true }
        guard let state = ServerError.sqlState(of: error) else { return false }
        return state == "40P01" || state == "40001"
    }
}
