import Foundation
import PostgresNIO
import Synchronization

/// The primary behind a read replica, and whether the replica is resting after a failure.
package final class ReplicaFallback: Sendable {
    let primary: Database
    private let restingUntil = Mutex<ContinuousClock.Instant?>(nil)
    static let rest: Duration = .seconds(10)

    init(primary: Database) {
        self.primary = primary
    }

    var resting: Bool {
        restingUntil.withLock { until in
            guard let end = until else { return false }
            if ContinuousClock.now < end { return true }
            until = nil
            return false
        }
    }

    /// 40001: cancelled by a recovery conflict; 3D000: the database is not there yet.
    static func conflictsWithReplay(_ error: any Error) -> Bool {
        guard let error = error as? PSQLError, error.code == .server,
              let state = error.serverInfo?[.sqlState] else { return false }
        return state == "40001" || state == "3D000"
    }

    func rest() {
        restingUntil.withLock { $0 = ContinuousClock.now + Self.rest }
    }
}

/// A second pool of the same database whose connections start with
/// `plan_cache_mode = force_generic_plan`, so a statement held to its generic plan costs one
/// round trip instead of `BEGIN`, `SET LOCAL`, the statement and `COMMIT`. A class, so that a
/// `Database` can hold one (and a read replica's, the primary's as its fallback).
package final class GenericPlanPool: Sendable {
    package let database: Database

    package init(_ database: Database) {
        self.database = database
    }
}
