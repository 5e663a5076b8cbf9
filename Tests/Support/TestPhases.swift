import Dispatch
import Foundation
import Synchronization
import Testing

/// Where each running test stands in its database's life (created, in use, dropped), written
/// to standard error when the test process gets SIGUSR1. A test run has hung a few times with
/// every thread idle and no query running (README, Tests): an `await` that never resumed, and
/// a thread dump cannot say which. `make test` also sets `BOOKWORM_TEST_REPORT_AFTER` to a
/// little less than its timeout, and the same report is written then, while `swift test` still
/// relays the process's output (a signal after its timeout reached an orphan whose output went
/// nowhere): the next hang names the phase every stuck test is in, and for how long.
package enum TestPhases {
    private struct Entry {
        let test: String
        let phase: String
        let since: ContinuousClock.Instant
    }

    private static let entries = Mutex<[UInt64: Entry]>([:])
    private static let nextID = Atomic<UInt64>(0)
    // Made once (a static's lazy start is thread-safe) and never changed after.
    nonisolated(unsafe) private static let handler: DispatchSourceSignal = {
        signal(SIGUSR1, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGUSR1, queue: .global())
        source.setEventHandler { FileHandle.standardError.write(Data(report().utf8)) }
        source.resume()
        if let after = ProcessInfo.processInfo.environment["BOOKWORM_TEST_REPORT_AFTER"].flatMap(Int.init) {
            DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(after)) {
                FileHandle.standardError.write(Data(report().utf8))
            }
        }
        return source
    }()

    /// Runs `body` as `phase` of the current test.
    package static func during<T>(_ phase: String, _ body: () async throws -> T) async throws -> T {
        _ = handler
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        let test = Test.current.map { "\($0.id)" } ?? "(no test)"
        entries.withLock { $0[id] = Entry(test: test, phase: phase, since: .now) }
        defer { _ = entries.withLock { $0.removeValue(forKey: id) } }
        return try await body()
    }

    /// One line per phase in progress, the longest first.
    static func report() -> String {
        let now = ContinuousClock.now
        let lines = entries.withLock { Array($0.values) }
            .sorted { $0.since < $1.since }
            .map { entry in
                "  \((now - entry.since).components.seconds) s  \(entry.phase)  \(entry.test)\n"
            }
        return "test phases in progress (\(lines.count)):\n" + lines.joined()
    }
}
