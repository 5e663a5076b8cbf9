import BookwormCore
import Foundation
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle
import UnixSignals

/// Whether the server is draining: told to stop, still serving, and saying so on
/// `/health/ready` so that a load balancer sends it nothing new.
package final class ShutdownDrain: Sendable {
    private let state = NIOLockedValueBox(false)

    package init() {}

    package var isDraining: Bool { state.withLockedValue { $0 } }

    func begin() { state.withLockedValue { $0 = true } }
}

/// Waits for SIGTERM or SIGINT. Then `/health/ready` answers 503 at once while everything keeps
/// serving (new connections too) for `seconds`, the time a load balancer takes to notice; then
/// this service returns and the group shuts down gracefully: the server stops accepting and
/// finishes what is in flight. A second signal during the drain cuts it short, for an operator
/// who wants the process gone now.
struct DrainOnSignal: Service {
    let drain: ShutdownDrain
    let seconds: Double
    let clock: any AppClock
    let logger: Logger

    func run() async throws {
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        let (started, start) = AsyncStream<Void>.makeStream()
        await withTaskGroup(of: Void.self) { group in
            // Ends without a signal when the group stops for another reason (a service failed).
            group.addTask {
                var received = 0
                for await signal in signals.cancelOnGracefulShutdown() {
                    received += 1
                    guard received == 1 else {
                        logger.notice("second signal: ending the drain now", metadata: ["signal": "\(signal)"])
                        return
                    }
                    drain.begin()
                    logger.notice("draining before shutdown", metadata: ["signal": "\(signal)", "seconds": .stringConvertible(seconds)])
                    start.yield()
                }
            }
            group.addTask {
                for await _ in started {
                    try? await clock.sleep(for: .milliseconds(Int(seconds * 1000)))
                    return
                }
            }
            await group.next()
            group.cancelAll()
        }
    }
}

/// `serve`'s service group: the application, and the drain that ends it on a signal. The group
/// itself traps no signal: SIGTERM handed straight to it would close the listener at once.
package func runServing(_ app: BookwormApplication, config: Config) async throws {
    let drain = DrainOnSignal(drain: config.drain, seconds: config.shutdownDrainSeconds, clock: config.clock, logger: app.logger)
    let group = ServiceGroup(configuration: .init(services: [
        .init(service: app),
        .init(service: drain, successTerminationBehavior: .gracefullyShutdownGroup),
    ], logger: app.logger))
    try await group.run()
}
