import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One Server-Sent Event as a client sees it; a comment line alone is one with `comment` set.
struct ReceivedEvent: Sendable {
    var event: String?
    var id: String?
    var data = ""
    var comment: String?

    var json: [String: Any]? { (try? JSONSerialization.jsonObject(with: Data(data.utf8))) as? [String: Any] }
}

/// A `text/event-stream` response read as it arrives over a `RawSocket` (chunked framing
/// undone), the way an app's SSE client reads it. Its calls block: run them off the pool.
final class EventStreamClient: @unchecked Sendable {
    let socket: RawSocket
    let status: Int
    let headers: [String: String]
    /// The head's answer when it was not a stream (a problem+json body).
    let refusal: RawResponse?
    private var raw: [UInt8] = []
    /// Event text not yet a whole block, and the whole blocks not yet taken (from `head` on).
    private var text = ""
    private var blocks: [String] = []
    private var head = 0
    private(set) var ended = false
    /// What `count` has counted so far, readable from another thread while it runs.
    let counted = Atomic<Int>(0)

    init(port: Int, path: String, token: String, lastEventID: String? = nil, receiveBuffer: Int32? = nil, timeout: TimeInterval = 20) throws {
        socket = try RawSocket(port: port, receiveBuffer: receiveBuffer)
        var request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nAuthorization: Bearer \(token)\r\n"
        if let lastEventID { request += "Last-Event-ID: \(lastEventID)\r\n" }
        try socket.send(request + "\r\n")
        var received: [UInt8] = []
        let separator: [UInt8] = [13, 10, 13, 10]
        while true {
            if let end = received.indices.dropLast(3).first(where: { Array(received[$0..<$0 + 4]) == separator }) {
                let head = String(decoding: received[..<end], as: UTF8.self).components(separatedBy: "\r\n")
                status = head.first.flatMap { Int($0.dropFirst(9).prefix(3)) } ?? 0
                var fields: [String: String] = [:]
                for line in head.dropFirst() {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
                headers = fields
                raw = Array(received[(end + 4)...])
                refusal = fields["content-type"]?.hasPrefix("text/event-stream") == true ? nil : socket.readResponse(prefix: received, timeout: timeout)
                return
            }
            guard let bytes = Self.read(socket, timeout: timeout), !bytes.isEmpty else { throw TestFailure("no response head to GET \(path)") }
            received += bytes
        }
    }

    /// The next event (comments included when `comments`), or nil when none came within
    /// `timeout` or the stream ended.
    func next(timeout: TimeInterval = 20, comments: Bool = false, skipping skipped: String) -> ReceivedEvent? {
        let end = Date().addingTimeInterval(timeout)
        while let event = next(timeout: max(0, end.timeIntervalSinceNow), comments: comments) {
            if event.event != skipped { return event }
        }
        return nil
    }

    func next(timeout: TimeInterval = 20, comments: Bool = false) -> ReceivedEvent? {
        let end = Date().addingTimeInterval(timeout)
        while true {
            dechunk()
            while head < blocks.count {
                let event = Self.parse(blocks[head])
                head += 1
                if event.event != nil || !event.data.isEmpty || event.id != nil || (comments && event.comment != nil) { return event }
            }
            let left = end.timeIntervalSinceNow
            guard !ended, left > 0, let bytes = Self.read(socket, timeout: left) else { return nil }
            if bytes.isEmpty { ended = true } else { raw += bytes }
        }
    }

    /// The next event that is `name`, skipping others.
    func next(_ name: String, timeout: TimeInterval = 20) -> ReceivedEvent? {
        let end = Date().addingTimeInterval(timeout)
        while let event = next(timeout: max(0, end.timeIntervalSinceNow)) {
            if event.event == name { return event }
        }
        return nil
    }

    /// Reads until `atLeast` events named `name` have come (or `timeout` passes, or the stream
    /// ends), counting them in the raw bytes as they arrive, fast enough for a flood.
    func count(_ name: String, atLeast: Int, timeout: TimeInterval) -> Int {
        let marker = Array("event: \(name)\n".utf8)
        var found = 0, carry: [UInt8] = []
        let end = Date().addingTimeInterval(timeout)
        while found < atLeast, !ended, end.timeIntervalSinceNow > 0 {
            guard let bytes = Self.read(socket, timeout: end.timeIntervalSinceNow) else { break }
            if bytes.isEmpty { ended = true }
            let window = carry + bytes
            // memchr and memcmp: a byte-by-byte scan in a debug build reads slower than the server writes.
            window.withUnsafeBytes { haystack in
                marker.withUnsafeBytes { needle in
                    guard let base = haystack.baseAddress, let first = needle.first, let pattern = needle.baseAddress else { return }
                    var offset = 0
                    while offset + needle.count <= haystack.count,
                          let hit = memchr(base + offset, Int32(first), haystack.count - offset - needle.count + 1) {
                        let at = base.distance(to: UnsafeRawPointer(hit))
                        if memcmp(base + at, pattern, needle.count) == 0 {
                            found += 1
                            counted.add(1, ordering: .relaxed)
                            offset = at + needle.count
                        } else {
                            offset = at + 1
                        }
                    }
                }
            }
            carry = Array(window.suffix(marker.count - 1))
        }
        return found
    }

    /// Whether the server ends the stream within `timeout` (what it sent meanwhile is read and dropped).
    func endsWithin(_ timeout: TimeInterval) -> Bool {
        // A client made with a tiny buffer (to stall the server) drains what is left with a
        // large one: through a window smaller than loopback's segment, the kernel advertises
        // no room after a read, and the server's side sends only at its zero-window probes,
        // which back off for seconds after a long stall (the slow-reader test missed its 30 s
        // in a full run).
        socket.growReceiveBuffer(to: 1 << 20)
        let end = Date().addingTimeInterval(timeout)
        while !ended, end.timeIntervalSinceNow > 0 {
            guard let bytes = Self.read(socket, timeout: end.timeIntervalSinceNow) else { return false }
            if bytes.isEmpty { ended = true } else { raw += bytes }
            dechunk()
        }
        return ended
    }

    /// Whether the server closes the connection within `timeout` (what it sent meanwhile is dropped).
    func closedWithin(_ timeout: TimeInterval) -> Bool {
        let end = Date().addingTimeInterval(timeout)
        while end.timeIntervalSinceNow > 0 {
            guard let bytes = Self.read(socket, timeout: end.timeIntervalSinceNow) else { return false }
            if bytes.isEmpty { return true }
        }
        return false
    }

    /// Undoes the chunked framing of what has arrived, and splits the text into blocks. Each
    /// buffer is cut once per call, not once per chunk or event: a flood of thousands of events
    /// read in one go would otherwise be moved thousands of times (slow enough in a debug build
    /// to miss a test's deadline on a busy machine).
    private func dechunk() {
        var start = 0
        defer { if start > 0 { raw.removeFirst(start) } }
        while let lineEnd = (start..<max(start, raw.count - 1)).first(where: { raw[$0] == 13 && raw[$0 + 1] == 10 }) {
            guard let size = Int(String(decoding: raw[start..<lineEnd], as: UTF8.self), radix: 16) else { break }
            if size == 0 {
                ended = true
                raw = []
                start = 0
                break
            }
            guard raw.count >= lineEnd + 2 + size + 2 else { break }
            text += String(decoding: raw[(lineEnd + 2)..<(lineEnd + 2 + size)], as: UTF8.self)
            start = lineEnd + 2 + size + 2
        }
        guard text.contains("\n\n") else { return }
        var pieces = text.components(separatedBy: "\n\n")
        text = pieces.removeLast()
        if head > 0 {
            blocks.removeFirst(head)
            head = 0
        }
        blocks += pieces
    }

    private static func parse(_ block: String) -> ReceivedEvent {
        var event = ReceivedEvent()
        var data: [String] = []
        for line in block.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix(":") {
                event.comment = line.dropFirst().trimmingCharacters(in: .whitespaces)
                continue
            }
            let parts = line.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            let value = parts.count > 1 ? String(parts[1].hasPrefix(" ") ? parts[1].dropFirst() : parts[1]) : ""
            switch parts[0] {
            case "event": event.event = value
            case "id": event.id = value
            case "data": data.append(value)
            default: break
            }
        }
        event.data = data.joined(separator: "\n")
        return event
    }

    /// Bytes that arrived within `timeout`; empty at the end of the stream; nil if none came.
    private static func read(_ socket: RawSocket, timeout: TimeInterval) -> [UInt8]? {
        var poller = pollfd(fd: socket.fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(max(1, timeout * 1000))) > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let count = buffer.withUnsafeMutableBytes { recv(socket.fd, $0.baseAddress, $0.count, 0) }
        return count <= 0 ? [] : Array(buffer[0..<count])
    }
}
