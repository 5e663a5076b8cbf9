import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The machine's own floor under the paced `GET /v1/me` probes (the import storm, photos): one
/// byte echoed over loopback TCP at the probe's pace (every 10 ms), with no server and no
/// database, first alone and then beside one core's worth of work that sleeps and wakes (four
/// threads, each busy 1 ms in every 4), as an import's PostgreSQL backend and the server's own
/// glue do. The busy p99 over the idle one is the ratio no server beats on this machine while
/// that much work at normal priority shares its cores: a woken thread often waits for a busy
/// core while the other is idle. (The same work in `SCHED_IDLE` leaves the echo as it was idle,
/// which is why the project's own heavy work runs there; PostgreSQL's backends are not ours.)
struct WakeFloor {
    let idle: Percentiles
    let busy: Percentiles
    var ratio: Double { busy.p99 / max(idle.p99, 0.001) }

    static func measure(seconds: Double = 5) -> WakeFloor? {
        guard let echo = Echo() else { return nil }
        defer { echo.close() }
        let idle = echo.pingPong(seconds: seconds)
        let stop = LockedFlag()
        let workers = (0..<4).map { _ in
            Thread {
                var value = 0.0
                while !stop.isSet {
                    let until = ContinuousClock.now + .milliseconds(1)
                    while ContinuousClock.now < until { value += 1 }
                    usleep(3_000)
                }
                if value < 0 { FileHandle.standardError.write(Data("unreachable\n".utf8)) }
            }
        }
        workers.forEach { $0.start() }
        let busy = echo.pingPong(seconds: seconds)
        stop.set()
        return WakeFloor(idle: Percentiles(idle), busy: Percentiles(busy))
    }

    var detail: String { String(format: "idle %.2f ms, beside one core of waking work %.2f ms", idle.p99, busy.p99) }

    /// A loopback TCP pair whose far end echoes each byte from a thread of its own.
    private final class Echo: @unchecked Sendable {
        let client: Int32
        private let listener: Int32

        init?() {
            let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            self.listener = listener
            self.client = client
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(listener, $0, length) == 0 && listen(listener, 1) == 0 && getsockname(listener, $0, &length) == 0
                }
            }
            guard bound else { return nil }
            Thread {
                let peer = accept(listener, nil, nil)
                guard peer >= 0 else { return }
                Echo.noDelay(peer)
                var byte: UInt8 = 0
                while read(peer, &byte, 1) == 1, write(peer, &byte, 1) == 1 {}
                Glibc.close(peer)
            }.start()
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, length) == 0 }
            }
            guard connected else { return nil }
            Echo.noDelay(client)
        }

        func pingPong(seconds: Double) -> [Double] {
            var latencies: [Double] = []
            let until = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
            var byte: UInt8 = 1
            while ContinuousClock.now < until {
                let begun = ContinuousClock.now
                guard write(client, &byte, 1) == 1, read(client, &byte, 1) == 1 else { break }
                latencies.append((ContinuousClock.now - begun).milliseconds)
                usleep(10_000)
            }
            return latencies
        }

        func close() {
            Glibc.close(client)
            Glibc.close(listener)
        }

        private static func noDelay(_ socket: Int32) {
            var one: Int32 = 1
            _ = setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        }
    }
}

extension WakeFloor {
    /// The results row: the floor's busy p99 against its idle one, without a goal.
    static func row(_ floor: WakeFloor) -> ResultRow {
        ResultRow("the machine's floor: loopback echo p99 beside one core of waking work", floor.busy.p99, "ms",
                  reference: String(format: "idle %.2f ms", floor.idle.p99), ratio: floor.ratio)
    }
}
