import CEpoll
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What waking up costs on this machine while bursty work at normal priority keeps about one
/// of its cores busy, measured with no project code at all: one byte echoed over loopback TCP
/// at the storm probe's pace (every 10 ms), alone, then beside four threads that each spin 1 ms
/// in every 4 and sleep the rest (a thread spinning without sleeping costs the echo nothing).
/// Each echo is two wake-ups, the echo's thread and then the caller's, and the difference of
/// the two p99s is what such waits add to a round trip. It sets the storm's `GET /v1/me` goal
/// in proportion; it is not a bound on it.
struct WakeDelay {
    let idle: Percentiles
    let busy: Percentiles
    var addedMillis: Double { busy.p99 - idle.p99 }

    /// The probe's idle p99 with `addedMillis` added, over that idle p99: what a probe whose
    /// slowest requests met what the echo's did, and nothing else, would show.
    func ratio(onIdle probeIdle: Double) -> Double { (probeIdle + addedMillis) / max(probeIdle, 0.001) }

    /// Nil when the loopback pair cannot be made or a phase gathered too few echoes for a p99.
    static func measure(seconds: Double = 10) -> WakeDelay? {
        guard let echo = Echo(), let idle = echo.pingPong(seconds: seconds) else { return nil }
        let stop = LockedFlag()
        for _ in 0..<4 {
            Thread {
                while !stop.isSet {
                    let until = ContinuousClock.now + .milliseconds(1)
                    while ContinuousClock.now < until {}
                    usleep(3_000)
                }
            }.start()
        }
        let busy = echo.pingPong(seconds: seconds)
        stop.set()
        guard let busy, idle.count >= 100, busy.count >= 100 else { return nil }
        return WakeDelay(idle: Percentiles(idle), busy: Percentiles(busy))
    }

    /// A loopback TCP pair whose far end echoes each byte from a thread of its own. The client
    /// waits at most a second for an echo, so a far end that failed ends the measure, not the run.
    private final class Echo {
        private let client: Int32
        private let listener: Int32

        init?() {
            listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let (listener, client) = (listener, client)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(listener, $0, length) == 0 && listen(listener, 1) == 0 && getsockname(listener, $0, &length) == 0
                }
            }
            let connected = bound && withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, length) == 0 }
            }
            // The connection waits in the listener's queue until this accepts it.
            let peer = connected ? accept(listener, nil, nil) : -1
            guard peer >= 0 else { return nil }
            var timeout = timeval(tv_sec: 1, tv_usec: 0)
            _ = setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            Echo.noDelay(client)
            Echo.noDelay(peer)
            Thread {
                var byte: UInt8 = 0
                while read(peer, &byte, 1) == 1, send(peer, &byte, 1, Int32(MSG_NOSIGNAL)) == 1 {}
                close(peer)
            }.start()
        }

        deinit {
            close(client)
            close(listener)
        }

        /// Nil when an echo failed or came late: a late one would be read as the next one's.
        func pingPong(seconds: Double) -> [Double]? {
            var latencies: [Double] = []
            let until = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
            var byte: UInt8 = 1
            while ContinuousClock.now < until {
                let begun = ContinuousClock.now
                guard send(client, &byte, 1, Int32(MSG_NOSIGNAL)) == 1, read(client, &byte, 1) == 1 else { return nil }
                latencies.append((ContinuousClock.now - begun).milliseconds)
                usleep(10_000)
            }
            return latencies
        }

        private static func noDelay(_ socket: Int32) {
            var one: Int32 = 1
            _ = setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        }
    }
}
