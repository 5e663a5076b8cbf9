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
    let window: PushWindow
    let clock: any AppClock
    let logger: Logger

    package init(store: PushStore, transport: PushTransport, settings: PushSettings, clock: any AppClock, logger: Logger) {
        self.store = store
        self.transport = transport
        self.maxAttempts = settings.maxAttempts
        self.window = PushWindow(settings.inFlight)
        self.clock = clock
        self.logger = logger
    }

    package func run(_ jobs: [ClaimedJob]) async -> [UUID: JobOutcome] {
        let pushes: [PushJob], unreadable: [UUID]
        do {
            (pushes, unreadable) = try await store.load(jobs)
        } catch {
            logger.warning("pushes not read; retrying", metadata: ["error": .string(String(reflecting: error))])
            return [:]
        }
        var outcomes: [UUID: JobOutcome] = [:]
        var tally: [[String]: Int] = [:]
        for id in unreadable {
            logger.warning("push dropped: its payload is not a push", metadata: ["job_id": .string(id.uuidString)])
            outcomes[id] = .done
        }
        if !unreadable.isEmpty { tally[["unknown", "unreadable"]] = unreadable.count }
        var gone: [UUID] = []
        // `inFlight` requests at once, shared with the next batch, which the runner has already
        // started: as this one's last requests finish, the next one's take their places.
        await withTaskGroup(of: (PushJob, PushResult).self) { group in
            for push in pushes {
                guard let device = push.device else {
                    outcomes[push.jobID] = .done
                    continue
                }
                await window.acquire()
                group.addTask { [window, transport] in
                    let result = await transport.send(push, to: device)
                    await window.release()
                    return (push, result)
                }
            }
            for await (push, result) in group {
                let (outcome, counted) = self.outcome(push, result)
                outcomes[push.jobID] = outcome
                tally[[push.provider, counted], default: 0] += 1
                if result == .gone, let device = push.device { gone.append(device.id) }
            }
        }
        for (key, count) in tally {
            Counter(label: "bookworm_push_sent_total", dimensions: [("provider", key[0]), ("result", key[1])]).increment(by: count)
        }
        do {
            try await store.deleteDevices(gone)
        } catch {
            logger.warning("gone devices not deleted", metadata: ["error": .string(String(reflecting: error))])
        }
        return outcomes
    }

    /// The job's outcome, and the result the metric counts.
    private func outcome(_ push: PushJob, _ result: PushResult) -> (JobOutcome, String) {
        switch result {
        case .sent, .gone:
            return (.done, result.metricResult)
        case .rejected(let why):
            logger.warning("push refused", metadata: ["provider": .string(push.provider), "reason": .string(why)])
            return (.done, result.metricResult)
        case .retry(let after, let why):
            return retry(push, after: after, why: why, counted: result.metricResult)
        case .unconfigured(let why):
            return retry(push, after: PushTransport.notHereDelay, why: why, counted: result.metricResult)
        }
    }

    private func retry(_ push: PushJob, after: TimeInterval?, why: String, counted: String) -> (JobOutcome, String) {
        guard push.attempts < maxAttempts else {
            logger.warning("push dropped after its last try", metadata: ["provider": .string(push.provider), "reason": .string(why)])
            return (.done, "gave_up")
        }
        return (.retry(at: clock.now().addingTimeInterval(after ?? JobRunner.backoff(attempts: push.attempts)), reason: why), counted)
    }
}

/// At most `limit` requests in flight across the batches a sender runs; the rest wait in turn.
actor PushWindow {
    private var free: Int
    private var waiters: [CheckedContinuation<Void, Never>] = []

    init(_ limit: Int) {
        free = max(1, limit)
    }

    func acquire() async {
        if free > 0 {
            free -= 1
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    func release() {
        if waiters.isEmpty {
            free += 1
        } else {
            waiters.removeFirst().resume()
        }
    }
}
