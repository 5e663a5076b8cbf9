import Foundation
import PostgresNIO

/// A query parameter kept apart from its SQL text, so the benchmarks can write the very SQL the
/// server binds as literals for pgbench (the bench target adds that rendering).
package enum SQLValue: Sendable {
    case text(String?)
    case textArray([String]?)
    case int(Int?)
    case double(Double?)
    case uuid(UUID?)
    case uuidArray([UUID])
    case int64Array([Int64])
    case bool(Bool)

    package func bind(into bindings: inout PostgresBindings) {
        switch self {
        case .text(let value): bindings.append(value)
        case .textArray(let value): bindings.append(value)
        case .int(let value): bindings.append(value)
        case .double(let value): bindings.append(value)
        case .uuid(let value): bindings.append(value)
        case .uuidArray(let value): bindings.append(value)
        case .int64Array(let value): bindings.append(value)
        case .bool(let value): bindings.append(value)
        }
    }
}

/// SQL text with `$n` placeholders plus its values.
package struct SQLStatement: Sendable {
    package let sql: String
    package let values: [SQLValue]

    package var query: PostgresQuery { PostgresQuery(unsafeSQL: sql, binds: Self.bindings(values)) }

    package init(sql: String, values: [SQLValue]) {
        self.sql = sql
        self.values = values
    }

    package static func bindings(_ values: [SQLValue]) -> PostgresBindings {
        var bindings = PostgresBindings(capacity: values.count)
        for value in values { value.bind(into: &bindings) }
        return bindings
    }
}

/// A statement on a hot path, prepared once per pooled connection under its type's name.
/// After its first few runs PostgreSQL keeps one generic plan for it, so a request pays for
/// running the statement only: planning a nearby page cost more than running it.
package protocol PreparedSQL: PostgresPreparedStatement where Row == PostgresRow {
    var values: [SQLValue] { get }
}

extension PreparedSQL {
    package func makeBindings() -> PostgresBindings { SQLStatement.bindings(values) }
    package func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
}
