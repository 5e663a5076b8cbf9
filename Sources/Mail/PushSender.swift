import BookwormCore
import Foundation
import Logging
import Metrics

/// Sends a claimed batch of pushes at once, each to its provider, and says what became of each:
/// sent or refused for good (the job goes), the device gone (it goes too), or tried again later
/// (429, 5xx, no answer) after the provider's `Retry-After` or backoff, until `maxAttempts`.
package struct PushSender: BatchJobHandler {
    package let kind = "push"
    let store: PushStore
    let transport: PushTransport
    let maxAttempts: Int
    let clock: any AppClock
    let logger: Logger

    package init(store: PushStore, transport: PushTransport, maxAttempts: Int, clock: any AppClock, logger: Logger) {
        self.store = store
        self.transport = transport
        self.maxAttempts = maxAttempts
        self.clock = clock
        self.logger = logger
    }

    package func run(_ jobs: [ClaimedJob]) async -> [UUID: JobOutcome] {
        let pushes: [PushJob]
        do {
            pushes = try await store.load(jobs)
        } catch {
            logger.warning("pushes not read; retrying", metadata: ["error": .string(String(reflecting: error))])
            return [:]
        }
        var outcomes: [UUID: JobOutcome] = [:]
        var gone: [UUID] = []
        await withTaskGroup(of: (PushJob, PushResult?).self) { group in
            for push in pushes {
                guard let device = push.device else {
                    outcomes[push.jobID] = .done
                    continue
                }
                group.addTask { (push, await transport.send(push, to: device)) }
            }
            for await (push, result) in group {
                guard let result else { continue }
                outcomes[push.jobID] = outcome(push, result)
                if result == .gone, let device = push.device { gone.append(device.id) }
            }
        }
        do {
            try await store.deleteDevices(gone)
        } catch {
            logger.warning("gone devices not deleted", metadata: ["error": .string(String(reflecting: error))])
        }
        return outcomes
    }

    private func outcome(_ push: PushJob, _ result: PushResult) -> JobOutcome {
        var counted = result.metricResult
        defer { Counter(label: "bookworm_push_sent_total", dimensions: [("provider", push.provider), ("result", counted)]).increment() }
        switch result {
        case .sent, .gone:
            return .done
        case .rejected(let why):
            logger.warning("push refused", metadata: ["provider": .string(push.provider), "reason": .string(why)])
            return .done
        case .retry(let after, let why):
            guard push.attempts < maxAttempts else {
                counted = "gave_up"
                logger.warning("push dropped after its last try", metadata: ["provider": .string(push.provider), "reason": .string(why)])
                return .done
            }
            return .retry(at: clock.now().addingTimeInterval(after ?? JobRunner.backoff(attempts: push.attempts)), reason: why)
        }
    }
}
