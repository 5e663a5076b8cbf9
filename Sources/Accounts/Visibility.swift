import BookwormCore

/// What other people may see of someone: nothing while they are suspended. Every search for
/// other people's things (library, nearby, map, feed, matches, alerts) adds this condition, so
/// lifting a suspension brings everything back unchanged.
package enum Visibility {
    /// SQL: the user in column `owner` is not suspended. `users_suspended_idx` holds only the
    /// suspended, so the probe per candidate costs next to nothing.
    package static func ownerActive(_ owner: String) -> String {
        "NOT EXISTS (SELECT 1 FROM users su WHERE su.id = \(owner) AND su.suspended_at IS NOT NULL)"
    }

    /// SQL: a copy or post (alias `row`, owner column `owner`) that reports have not hidden and
    /// whose owner is not suspended.
    package static func shown(_ row: String, owner: String) -> String {
        "\(row).hidden_at IS NULL AND \(ownerActive("\(row).\(owner)"))"
    }
}
