import Foundation
import PostgresNIO

/// A query parameter that can be bound (what the server does) or written as a SQL literal
/// (what the benchmarks hand to pgbench), so both run the very same SQL text.
enum SQLValue: Sendable {
    case text(String?)
    case textArray([String]?)
    case int(Int?)
    case double(Double?)
    case uuid(UUID?)
    case bool(Bool)

    func bind(into bindings: inout PostgresBindings) {
        switch self {
        case .text(let value): bindings.append(value)
        case .textArray(let value): bindings.append(value)
        case .int(let value): bindings.append(value)
        case .double(let value): bindings.append(value)
        case .uuid(let value): bindings.append(value)
        case .bool(let value): bindings.append(value)
        }
    }

    var literal: String {
        switch self {
        case .text(let value): value.map(Self.quote) ?? "NULL"
        case .textArray(let value): value.map { "ARRAY[" + $0.map(Self.quote).joined(separator: ",") + "]::text[]" } ?? "NULL"
        case .int(let value): value.map(String.init) ?? "NULL"
        // Shortest round-tripping text, so pgbench sees the very value the server binds.
        case .double(let value): value.map { "\($0)::float8" } ?? "NULL"
        case .uuid(let value): value.map { "'\($0.apiString)'::uuid" } ?? "NULL"
        case .bool(let value): value ? "true" : "false"
        }
    }

    private static func quote(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }
}

/// SQL text with `$n` placeholders plus its values.
struct SQLStatement: Sendable {
    let sql: String
    let values: [SQLValue]

    var query: PostgresQuery { PostgresQuery(unsafeSQL: sql, binds: Self.bindings(values)) }

    static func bindings(_ values: [SQLValue]) -> PostgresBindings {
        var bindings = PostgresBindings(capacity: values.count)
        for value in values { value.bind(into: &bindings) }
        return bindings
    }

    /// The same statement with every placeholder replaced by its literal, highest first so
    /// `$1` never clobbers `$10`.
    var literalSQL: String {
        var text = sql
        for (index, value) in values.enumerated().reversed() {
            text = text.replacingOccurrences(of: "$\(index + 1)", with: value.literal)
        }
        return text
    }
}

/// A statement on a hot path, prepared once per pooled connection under its type's name.
/// After its first few runs PostgreSQL keeps one generic plan for it, so a request pays for
/// running the statement only: planning a nearby page cost more than running it.
protocol PreparedSQL: PostgresPreparedStatement where Row == PostgresRow {
    var values: [SQLValue] { get }
}

extension PreparedSQL {
    func makeBindings() -> PostgresBindings { SQLStatement.bindings(values) }
    func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
}
