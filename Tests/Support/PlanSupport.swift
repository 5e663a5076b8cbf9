import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// Reading `EXPLAIN (FORMAT JSON)` output: its nodes, and how much of a table a plan really touched.
package enum PlanRows {
    /// Every plan node (subplans and init plans included), depth first.
    package static func nodes(in node: Any) -> [[String: Any]] {
        if let list = node as? [Any] { return list.flatMap { nodes(in: $0) } }
        guard let object = node as? [String: Any] else { return [] }
        let children = [object["Plan"], object["Plans"]].compactMap { $0 }.flatMap { nodes(in: $0) }
        return object["Node Type"] == nil ? children : [object] + children
    }

    /// Rows every plan node on `relation` produced or filtered out, over all its loops (`ANALYZE`).
    package static func read(_ relation: String, in plan: Any) -> Int {
        nodes(in: plan).filter { $0["Relation Name"] as? String == relation }.map { node in
            ((node["Actual Rows"] as? Int ?? 0) + (node["Rows Removed by Filter"] as? Int ?? 0)) * (node["Actual Loops"] as? Int ?? 1)
        }.reduce(0, +)
    }
}

extension TestApp {
    /// Whether a statement starting with `statement` waits on a lock in this test's database.
    package func waiting(on statement: String) async throws -> Bool {
        let rows = try await db.query("""
            SELECT count(*)::int8 FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND ltrim(query, E' \\n\\t') LIKE \(statement + "%")
            """)
        for try await count in rows.decode(Int64.self) { return count > 0 }
        return false
    }
}

extension PlanRows {
    /// (generic plans, custom plans) of each statement prepared on `connection` whose name is
    /// LIKE `pattern`: a statement held to its generic plan shows one and none.
    package static func preparedPlans(like pattern: String, on connection: PostgresConnection, logger: Logger) async throws -> [(Int, Int)] {
        var plans: [(Int, Int)] = []
        for try await row in try await connection.query("""
            SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name LIKE \(pattern)
            """, logger: logger).decode((Int, Int).self) { plans.append(row) }
        return plans
    }
}

extension PlanRows {
    /// `EXPLAIN (ANALYZE, FORMAT JSON)` of `sql` run once on its generic plan (prepared with
    /// parameter `types`, run with `arguments` written as SQL literals), parsed.
    package static func genericPlan(_ sql: String, types: String, arguments: [String], on connection: PostgresConnection,
                                    logger: Logger) async throws -> Any {
        let plan = try await explainGeneric(sql, types: types, options: "ANALYZE, FORMAT JSON", arguments: arguments,
                                            on: connection, logger: logger)
        return try JSONSerialization.jsonObject(with: Data(plan.joined().utf8))
    }

    /// `EXPLAIN (options) EXECUTE` of `sql` on its generic plan, prepared with parameter `types`
    /// or, when nil, with the types PostgreSQL infers; the output's lines.
    package static func explainGeneric(_ sql: String, types: String?, options: String, arguments: [String],
                                       on connection: PostgresConnection, logger: Logger) async throws -> [String] {
        try await connection.query("SET plan_cache_mode = force_generic_plan", logger: logger)
        try await connection.query(PostgresQuery(unsafeSQL: "PREPARE generic_plan_probe\(types.map { "(\($0))" } ?? "") AS \(sql)"),
                                   logger: logger)
        var plan: [String] = []
        for try await line in try await connection.query(PostgresQuery(unsafeSQL: """
            EXPLAIN (\(options)) EXECUTE generic_plan_probe(\(arguments.joined(separator: ", ")))
            """), logger: logger).decode(String.self) { plan.append(line) }
        try await connection.query("DEALLOCATE generic_plan_probe", logger: logger)
        try await connection.query("RESET plan_cache_mode", logger: logger)
        return plan
    }

    /// The rows the plan's top node returned (`ANALYZE`).
    package static func returned(by plan: Any) -> Int {
        ((plan as? [[String: Any]])?.first?["Plan"] as? [String: Any])?["Actual Rows"] as? Int ?? -1
    }

    /// `values` as SQL literals, for `genericPlan`'s arguments.
    package static func literals(_ values: [SQLValue]) -> [String] {
        values.map { value in
            switch value {
            case .text(let text): text.map { "'" + $0.replacingOccurrences(of: "'", with: "''") + "'" } ?? "NULL"
            case .textArray(let words): words.map { "ARRAY[" + $0.map { "'" + $0.replacingOccurrences(of: "'", with: "''") + "'" }
                .joined(separator: ",") + "]::text[]" } ?? "NULL"
            case .int(let number): number.map(String.init) ?? "NULL"
            case .bool(let flag): flag ? "true" : "false"
            case .uuid(let id): id.map { "'\($0.uuidString)'" } ?? "NULL"
            default: "NULL"
            }
        }
    }
}
