import Foundation

/// Reading `EXPLAIN (ANALYZE, FORMAT JSON)` output: how much of a table a plan really touched.
package enum PlanRows {
    /// Rows every plan node on `relation` produced or filtered out, over all its loops.
    package static func read(_ relation: String, in node: Any) -> Int {
        if let list = node as? [Any] { return list.map { read(relation, in: $0) }.reduce(0, +) }
        guard let object = node as? [String: Any] else { return 0 }
        var total = object["Plan"].map { read(relation, in: $0) } ?? 0
        total += object["Plans"].map { read(relation, in: $0) } ?? 0
        if object["Relation Name"] as? String == relation {
            let loops = object["Actual Loops"] as? Int ?? 1
            total += ((object["Actual Rows"] as? Int ?? 0) + (object["Rows Removed by Filter"] as? Int ?? 0)) * loops
        }
        return total
    }
}
