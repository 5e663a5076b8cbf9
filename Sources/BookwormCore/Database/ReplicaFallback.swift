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
