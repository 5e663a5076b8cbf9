import Dispatch
import Foundation
import Synchronization
import Testing

/// Where each running test stands in its database's life (created, in use, dropped), written
/// to standard error when the test process gets SIGUSR1. A hung run may have every thread idle
/// (an `await` that never resumed), and a thread dump cannot say which test it is. `make test`
/// sets `BOOKWORM_TEST_REPORT_AT` to a moment (seconds since 1970) a little before its timeout:
/// the report is written then, to standard error and to `BOOKWORM_TEST_HANG_REPORT`, which `make test` prints as the
/// failure when it stops the run, naming every test still running and its phase.
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
        if let at = ProcessInfo.processInfo.environment["BOOKWORM_TEST_REPORT_AT"].flatMap(Double.init) {
            let after = max(0, at - Date().timeIntervalSince1970)
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(after * 1000))) {
                let report = report()
                FileHandle.standardError.write(Data(report.utf8))
                // For `make test` to print as the failure once it stops the run as hung.
                if let path = ProcessInfo.processInfo.environment["BOOKWORM_TEST_HANG_REPORT"] {
                    try? report.write(toFile: path, atomically: true, encoding: .utf8)
                }
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
