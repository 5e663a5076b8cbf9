import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A blocking HTTP/1.1 keep-alive connection to the server under test, one per load thread:
/// each request's latency is measured from the first byte sent to the last byte read.
/// Unchecked: a connection is used by one thread at a time (handed over before the thread starts).
final class BenchHTTPConnection: @unchecked Sendable {
    private let fd: Int32
    private var buffer: [UInt8] = []

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Shell.Failure(description: "socket() failed") }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw Shell.Failure(description: "cannot connect to 127.0.0.1:\(port)")
        }
    }

    deinit { close(fd) }

    /// Sends one request and reads its whole answer: (status, body).
    func send(_ method: String, _ path: String, token: String?, json: String? = nil) throws -> (status: Int, body: String) {
        try send(method, path, token: token, body: Array((json ?? "").utf8), contentType: json == nil ? nil : "application/json")
    }

    func send(_ method: String, _ path: String, token: String?, body: [UInt8], contentType: String?,
              headers: [(String, String)] = []) throws -> (status: Int, body: String) {
        try send(prepared: Self.request(method, path, token: token, body: body, contentType: contentType, headers: headers))
    }

    /// A request's bytes, to be sent with `send(prepared:)` (large bodies made before a timed phase).
    static func request(_ method: String, _ path: String, token: String?, body: [UInt8], contentType: String?,
                        headers: [(String, String)] = []) -> [UInt8] {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n"
        if let token { head += "Authorization: Bearer \(token)\r\n" }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let contentType { head += "Content-Type: \(contentType)\r\n" }
        head += "Content-Length: \(body.count)\r\n\r\n"
        return Array(head.utf8) + body
    }

    func send(prepared bytes: [UInt8]) throws -> (status: Int, body: String) {
        var sent = 0
        while sent < bytes.count {
            // A server that answers early (413, 503) and closes must not kill the benchmark with SIGPIPE.
            let written = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { throw Shell.Failure(description: "write failed") }
            sent += written
        }
        let headerEnd = try readUntilHeaderEnd()
        let header = String(decoding: buffer[..<headerEnd], as: UTF8.self)
        let lines = header.split(separator: "\r\n")
        guard let statusLine = lines.first, let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "") else {
            throw Shell.Failure(description: "bad status line")
        }
        let length = lines.dropFirst().compactMap { line -> Int? in
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
            return Int(parts[1].trimmingCharacters(in: .whitespaces))
        }.first ?? 0
        buffer.removeFirst(headerEnd + 4)
        while buffer.count < length { try fill() }
        let text = String(decoding: buffer[..<length], as: UTF8.self)
        buffer.removeFirst(length)
        return (status, text)
    }

    private func readUntilHeaderEnd() throws -> Int {
        while true {
            if buffer.count >= 4 {
                for index in 0...(buffer.count - 4)
                where buffer[index] == 13 && buffer[index + 1] == 10 && buffer[index + 2] == 13 && buffer[index + 3] == 10 {
                    return index
                }
            }
            try fill()
        }
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { throw Shell.Failure(description: "connection closed by the server") }
        buffer += chunk[..<count]
    }
}

/// Runs `body(index)` on `count` threads at once and waits for all of them.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        let thread = Thread {
            body(index)
            group.leave()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }
    group.wait()
}

/// `GET path` on one connection while `going`, each latency into `samples`, pausing
/// `pauseMicros` between requests (a person browsing, not a load generator).
func probe(port: Int, _ path: String, token: String, pauseMicros: UInt32 = 0, into samples: Samples, while going: () -> Bool) {
    guard let connection = try? BenchHTTPConnection(port: port) else { return }
    while going() {
        let begun = ContinuousClock.now
        let status = (try? connection.send("GET", path, token: token).status) ?? 0
        samples.add(millis: (ContinuousClock.now - begun).milliseconds, status: status)
        if pauseMicros > 0 { usleep(pauseMicros) }
    }
}

/// Latencies and statuses, appended from many threads.
final class Samples: @unchecked Sendable {
    private let lock = NSLock()
    private var latencies: [Double] = []
    private var statuses: [Int: Int] = [:]

    func add(millis: Double, status: Int) {
        lock.withLock {
            latencies.append(millis)
            statuses[status, default: 0] += 1
        }
    }

    var all: (latencies: [Double], statuses: [Int: Int]) { lock.withLock { (latencies, statuses) } }
}
