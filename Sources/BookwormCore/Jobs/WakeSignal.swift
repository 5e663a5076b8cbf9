import Foundation

/// A wake-up that is not lost when it comes before anyone waits.
package actor WakeSignal {
    private let clock: any AppClock
    private var pending = false
    private var waiter: CheckedContinuation<Void, Never>?

    package init(clock: any AppClock) {
        self.clock = clock
    }

    package func signal() {
        if let waiter {
            self.waiter = nil
            waiter.resume()
        } else {
            pending = true
        }
    }

    package func wait(timeout: TimeInterval) async {
        if pending {
            pending = false
            return
        }
        let timer = Task { [weak self, clock] in
            try? await clock.sleep(for: .milliseconds(Int(timeout * 1000)))
            await self?.timeUp()
        }
        await withCheckedContinuation { waiter = $0 }
        timer.cancel()
    }

    private func timeUp() {
        if let waiter {
            self.waiter = nil
            waiter.resume()
        }
    }
}
