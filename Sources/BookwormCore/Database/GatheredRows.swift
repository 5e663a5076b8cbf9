import NIOCore
import PostgresNIO
import Synchronization

/// A `PreparedSQL` statement whose rows are read from their bytes (`RowCells`, `JSONCells`) or
/// through `decode` of a `binary` cell, never a plain `decode`: `Database` gathers its rows on
/// the connection's event loop (`GatheredRows`) instead of reading them through an async sequence.
package protocol GatheredSQL: PreparedSQL {}

extension GatheredSQL {
    package static var gathersRows: Bool { true }
}

/// Rows gathered on the connection's event loop, through PostgresNIO's `PreparedQuery`.
///
/// `PostgresConnection.execute` hands rows over through an async sequence that stops reading
/// the socket after every batch until its consumer has taken the batch: a nearby page (51 rows,
/// about 30 KB, which PostgreSQL sends in 8 KB pieces) came in two reads or more, and each pause
/// took the socket out of `epoll` and put it back (1.4 `epoll_ctl` a page), beside the
/// sequence's own locking and hops (5 % in `perf`). `PreparedQuery.execute` asks for the next
/// read at once. Alternating the two builds under `wrk` (nearby, 22 rounds), the server used
/// 8 % less CPU a page (README, the HTTP layer).
///
/// That older API has three quirks, all kept here:
/// - it prepares without parameter types, and a statement's shape may leave some parameters
///   unused (nearby copies without words). The declared types are named in a `WITH` query that
///   nothing references, which the planner drops (`NearbyCrowdTests` holds the plan to be the
///   statement's own);
/// - its rows say their columns are in text format, though PostgreSQL sends them in binary as
///   asked. `decode` goes by the format, so it reads them only through `binary`, which restates
///   it; the byte readers do not look at it;
/// - its errors are PostgresNIO's older `PostgresError` for a server's error or a closed
///   connection, which `ServerError` and `DatabaseOutage` read too, and NIO's own for a
///   connection that failed, which become `DatabaseConnectionClosed`.
/// Each connection prepares a statement once, under a name of PostgresNIO's choosing, and the
/// statement is forgotten when the connection closes.
package final class GatheredRows: Sendable {
    package static let shared = GatheredRows()

    /// One of its own, for a test that counts what it remembers.
    package init() {}

    private struct Key: Hashable {
        let connection: ObjectIdentifier
        let statement: String
    }

    /// A prepared query holds its connection, so a key's connection is alive while it is here.
    private let prepared = Mutex<[Key: PreparedQuery]>([:])

    package func rows<Statement: PreparedSQL>(of statement: Statement, on connection: PostgresConnection) async throws
        -> [PostgresRow]
    {
        let binds = try statement.values.map { try $0.postgresData() }
        do {
            return try await preparedQuery(Statement.self, on: connection).execute(binds).get()
        } catch is ChannelError {
            // What the older API passes on from a connection that failed under it.
            throw DatabaseConnectionClosed()
        } catch is IOError {
            throw DatabaseConnectionClosed()
        }
    }

    /// How many connections' statements are remembered, for the tests.
    package var remembered: Int { prepared.withLock { $0.count } }

    private func preparedQuery<Statement: PreparedSQL>(_: Statement.Type, on connection: PostgresConnection) async throws
        -> PreparedQuery
    {
        let key = Key(connection: ObjectIdentifier(connection), statement: Statement.name)
        if let query = prepared.withLock({ $0[key] }) { return query }
        let query = try await connection.prepare(query: Self.typedSQL(Statement.self)).get()
        prepared.withLock { $0[key] = query }
        connection.closeFuture.whenComplete { _ in _ = self.prepared.withLock { $0.removeValue(forKey: key) } }
        return query
    }

    /// The statement with its parameters' declared types named in an unreferenced `WITH` query.
    package static func typedSQL<Statement: PreparedSQL>(_: Statement.Type) -> String {
        let types = Statement.bindingDataTypes.enumerated().map { index, type in
            "$\(index + 1)::\(type.knownSQLName ?? "unknown")"
        }
        guard !types.isEmpty else { return Statement.sql }
        let declared = "WITH bookworm_parameter_types AS (SELECT \(types.joined(separator: ", ")))"
        let sql = Statement.sql
        if sql.hasPrefix("WITH ") { return declared + ",\n" + sql.dropFirst("WITH ".count) }
        return declared + "\n" + sql
    }
}

extension SQLValue {
    /// The value as `PreparedQuery` binds it: the very bytes `bind(into:)` writes.
    func postgresData() throws -> PostgresData {
        switch self {
        case .text(let value): try Self.data(value)
        case .textArray(let value): try Self.data(value)
        case .int(let value): try Self.data(value)
        case .double(let value): try Self.data(value)
        case .uuid(let value): try Self.data(value)
        case .uuidArray(let value): try Self.data(value)
        case .int64Array(let value): try Self.data(value)
        case .bool(let value): try Self.data(value)
        }
    }

    private static func data<Value: PostgresEncodable>(_ value: Value?) throws -> PostgresData {
        guard let value else { return PostgresData(type: Value.psqlType, formatCode: Value.psqlFormat, value: nil) }
        var bytes = ByteBuffer()
        try value.encode(into: &bytes, context: .default)
        return PostgresData(type: Value.psqlType, formatCode: Value.psqlFormat, value: bytes)
    }
}
