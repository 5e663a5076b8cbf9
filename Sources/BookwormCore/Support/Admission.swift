import Metrics
import Synchronization

/// At most `limit` callers at once (those working and those waiting for a thread); one more is
/// shed at once with 503 + `Retry-After`, counted in `shedMetric`. Password hashing and photos
/// bound their CPU work with it.
package final class Admission: Sendable {
    let limit: Int
    let shedMetric: String
    private let admitted = Mutex(0)

    package init(limit: Int, shedMetric: String) {
        self.limit = limit
        self.shedMetric = shedMetric
    }

    /// Callers admitted at this moment.
    package var count: Int { admitted.withLock { $0 } }

    /// `work` if there is room, else `AppError.overloaded`.
    package func run<T>(_ work: () async throws -> T) async throws -> T {
        let accepted = admitted.withLock { count -> Bool in
            guard count < limit else { return false }
            count += 1
            return true
        }
        guard accepted else {
            Counter(label: shedMetric).increment()
            throw AppError.overloaded(retryAfterSeconds: 1)
        }
        defer { admitted.withLock { $0 -= 1 } }
        return try await work()
    }
}
