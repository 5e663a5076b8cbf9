import Foundation

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
