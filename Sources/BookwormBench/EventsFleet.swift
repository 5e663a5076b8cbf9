import CEpoll
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Many open event streams from this process, read by one thread waiting on them all, as thousands of phones
/// would hold them. Each stream records when it last saw each event name, so a round can ask
/// how long after a moment every stream heard of it.
final class EventsFleet: @unchecked Sendable {
    struct Target {
        let port: Int
        let path: String
        let token: String
    }

    private var fds: [Int32] = []
    /// Per stream: when the kernel received the latest watched event (realtime nanoseconds, 0
    /// without a stamp), and a running count of them.
    private let heard: Mutex<(at: [Int64?], count: [Int], answered: [Bool])>
    private let watched: [UInt8]
    private let stop = Atomic(false)
    /// Until when the reader leaves the sockets alone: see `hold(for:)`.
    private let heldUntil = Mutex(ContinuousClock.now)
    private var reader: Thread?

    /// Opens every stream (one TCP connection each) and starts reading; `watch` is an event name.
    init(_ targets: [Target], watch: String) throws {
        watched = Array("event: \(watch)\n".utf8)
        heard = Mutex((Array(repeating: nil, count: targets.count), Array(repeating: 0, count: targets.count),
                       Array(repeating: false, count: targets.count)))
        // In batches, each answered before the next opens, as phones arrive over time: ten
        // thousand requests at the same instant would measure the server's peak of work in
        // flight (heap it keeps afterwards) rather than what an open stream holds.
        for start in stride(from: 0, to: targets.count, by: Self.batch) {
            let opened = try targets[start..<min(start + Self.batch, targets.count)].map { try Self.open($0) }
            fds += opened
            try Self.waitForFirstBytes(opened)
        }
        let thread = Thread { [unowned self] in self.read() }
        thread.stackSize = 1 << 20
        reader = thread
        thread.start()
    }

    static let batch = 500

    var count: Int { fds.count }

    /// Polls (without reading) until every socket has something to read: its request answered.
    static func waitForFirstBytes(_ sockets: [Int32]) throws {
        var waiting = sockets.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        let end = ContinuousClock.now + .seconds(120)
        while !waiting.isEmpty {
            guard ContinuousClock.now < end else { throw Shell.Failure(description: "\(waiting.count) streams never answered") }
            _ = poll(&waiting, nfds_t(waiting.count), 100)
            waiting.removeAll { $0.revents != 0 }
        }
    }

    /// How many times each stream has heard the event.
    var counts: [Int] { heard.withLock { $0.count } }

    /// Waits until every stream has had its first bytes (the server registered it before any);
    /// false if some had none within `timeout` seconds.
    func waitUntilOpen(timeout: Double) -> Bool {
        let end = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        while ContinuousClock.now < end {
            if heard.withLock({ $0.answered.allSatisfy { $0 } }) { return true }
            usleep(1000)
        }
        return false
    }

    /// An instant on the bench's clock and on the realtime clock of the kernel's arrival stamps.
    struct Moment {
        let seen: ContinuousClock.Instant
        let realtimeNanoseconds: Int64

        static var now: Moment { Moment(seen: .now, realtimeNanoseconds: bench_realtime_ns()) }
    }

    /// One stream's latency in milliseconds: until its bytes reached its socket (`wire`, the
    /// kernel's stamp; NaN when the kernel gave none).
    struct Arrival {
        let wire: Double
    }

    /// The reader reads nothing for `duration` from now, and the caller's wait (`arrivals`)
    /// starts after it: a round's fan-out is measured on the wire (the kernel's stamps, taken
    /// as the bytes reach each socket whenever they are read), so the bench's reading of a
    /// thousand sockets, work that phones do on machines of their own, stays off the servers'
    /// two cores while it runs. What comes later than the hold is read as it comes.
    func hold(for duration: Duration) {
        heldUntil.withLock { $0 = .now + duration }
    }

    /// How long the hold has left; zero when none.
    private var holdLeft: Duration { max(.zero, heldUntil.withLock { $0 } - .now) }

    /// Waits until every stream's count passes `before` (or `timeout` seconds pass, after any
    /// hold); then each stream's latest arrival after `since`.
    func arrivals(after before: [Int], since: Moment, timeout: Double) -> [Arrival] {
        Self.sleep(holdLeft)
        let end = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        while ContinuousClock.now < end {
            let done = heard.withLock { state in zip(state.count, before).allSatisfy { $0 > $1 } }
            if done { break }
            usleep(500)
        }
        return heard.withLock { state in
            zip(state.at, zip(state.count, before)).compactMap { at, counts in
                // An event may beat the COMMIT's answer to this process: that is no wait at all.
                guard counts.0 > counts.1, let at else { return nil }
                // No stamp (none from the kernel, or one that was a later message's): no wire
                // figure, and the report says so.
                let wire = at == 0 ? Double.nan : max(0, Double(at - since.realtimeNanoseconds) / 1e6)
                return Arrival(wire: wire)
            }
        }
    }

    private static func sleep(_ duration: Duration) {
        if duration > .zero { Thread.sleep(forTimeInterval: duration.milliseconds / 1000) }
    }

    func close() {
        stop.store(true, ordering: .relaxed)
        // The reader's last wait (what is left of a hold, then at most 100 ms in epoll) ends
        // before its descriptors close.
        if reader != nil { usleep(200_000) }
        for fd in fds { Glibc.close(fd) }
    }

    private static func open(_ target: Target) throws -> Int32 {
        try connect(port: target.port, sending: "GET \(target.path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nAuthorization: Bearer \(target.token)\r\n\r\n")
    }

    /// A TCP connection to 127.0.0.1:`port` that has sent `request`, non-blocking from then on.
    static func connect(port: Int, sending request: String) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Shell.Failure(description: "socket() failed: errno \(errno)") }
        guard bench_stamp_arrivals(fd) == 0 else {
            Glibc.close(fd)
            throw Shell.Failure(description: "SO_TIMESTAMPNS refused: errno \(errno)")
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            Glibc.close(fd)
            throw Shell.Failure(description: "cannot connect to 127.0.0.1:\(port): errno \(errno)")
        }
        let bytes = Array(request.utf8)
        guard bytes.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count else {
            Glibc.close(fd)
            throw Shell.Failure(description: "send failed")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        return fd
    }

    /// One epoll wait for every stream, not a poll() of all of them: a poll costs the whole
    /// set each call, and with events trickling in one socket at a time the reader, not the
    /// server, would set the pace of a thousand streams.
    private func read() {
        let epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        precondition(epoll >= 0, "epoll_create1 failed: errno \(errno)")
        defer { Glibc.close(epoll) }
        for (index, fd) in fds.enumerated() {
            var event = epoll_event()
            event.events = EPOLLIN.rawValue
            event.data.u64 = UInt64(index)
            precondition(epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event) == 0, "epoll_ctl failed: errno \(errno)")
        }
        var events = [epoll_event](repeating: epoll_event(), count: 512)
        var buffer = [UInt8](repeating: 0, count: 65536)
        var answered = [Bool](repeating: false, count: fds.count)
        // How much of the marker each stream's bytes end with: a marker may straddle two reads.
        var matched = [Int](repeating: 0, count: fds.count)
        let marker = Marker(watched)
        while !stop.load(ordering: .relaxed) {
            Self.sleep(holdLeft)
            let ready = Int(epoll_wait(epoll, &events, Int32(events.count), 100))
            guard ready > 0 else { continue }
            // Woken by the first bytes of a held round: the rest of it arrives meanwhile.
            if holdLeft > .zero { continue }
            for slot in 0..<ready {
                // One read per wake-up, without allocating: the reader's cost per event is CPU
                // the servers on this machine do not get (epoll wakes again for what is left).
                let index = Int(events[slot].data.u64)
                var arrived: Int64 = 0
                let count = buffer.withUnsafeMutableBytes { bench_recv_stamped(fds[index], $0.baseAddress, UInt($0.count), &arrived) }
                guard count > 0 else {
                    // Closed by the server, or broken: wait on it no more (it would wake every wait).
                    if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) { _ = epoll_ctl(epoll, EPOLL_CTL_DEL, fds[index], nil) }
                    continue
                }
                if !answered[index] {
                    answered[index] = true
                    heard.withLock { $0.answered[index] = true }
                }
                let (seen, later) = buffer.withUnsafeBufferPointer { bytes in
                    let piece = UnsafeBufferPointer(rebasing: bytes.prefix(count))
                    var end = 0
                    let seen = marker.count(in: piece, matched: &matched[index], lastEnd: &end)
                    return (seen, Self.messages(in: UnsafeBufferPointer(rebasing: piece[end...])))
                }
                // The kernel stamps a read with its last segment's arrival: a message after the
                // event in the same read (a heartbeat that came during the hold) would lend the
                // event its time.
                if seen > 0 { heard.withLock { $0.at[index] = later > 1 ? 0 : arrived; $0.count[index] += seen } }
            }
        }
    }
}

extension EventsFleet {
    /// How many messages end in `bytes` (each ends with a blank line).
    static func messages(in bytes: UnsafeBufferPointer<UInt8>) -> Int {
        var ends = 0, previous: UInt8 = 0
        for byte in bytes {
            if byte == UInt8(ascii: "\n"), previous == UInt8(ascii: "\n") { ends += 1 }
            previous = byte
        }
        return ends
    }
}

/// A byte string found in a stream read piece by piece (Knuth–Morris–Pratt: a partial match
/// carries over to the next piece, and no byte is looked at twice).
struct Marker {
    let bytes: [UInt8]
    /// For each length matched, the longest proper prefix that is also a suffix of it.
    let fallback: [Int]

    init(_ bytes: [UInt8]) {
        precondition(!bytes.isEmpty)
        self.bytes = bytes
        var fallback = [0, 0]
        var length = 0
        for index in 1..<bytes.count {
            while length > 0, bytes[index] != bytes[length] { length = fallback[length] }
            if bytes[index] == bytes[length] { length += 1 }
            fallback.append(length)
        }
        self.fallback = fallback
    }

    /// Occurrences completed in `piece`, given `matched` bytes of the marker matched before it;
    /// `lastEnd` is where the last of them ends in `piece`.
    func count(in piece: UnsafeBufferPointer<UInt8>, matched: inout Int, lastEnd: inout Int) -> Int {
        var found = 0
        for (offset, byte) in piece.enumerated() {
            while matched > 0, bytes[matched] != byte { matched = fallback[matched] }
            if bytes[matched] == byte { matched += 1 }
            if matched == bytes.count {
                found += 1
                matched = fallback[matched]
                lastEnd = offset + 1
            }
        }
        return found
    }
}
