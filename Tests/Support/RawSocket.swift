import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A plain TCP connection to a server under test: bytes out exactly as written, so a test can
/// send what no HTTP client library would (broken framing, half a header, nothing at all).
final class RawSocket: @unchecked Sendable {
    private(set) var fd: Int32

    /// `receiveBuffer`: the socket's receive buffer in bytes, set before connecting (a reader
    /// that stops reading fills it, and then the server's side, sooner).
    init(port: Int, host: String = "127.0.0.1", receiveBuffer: Int32? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket() failed: errno \(errno)") }
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &address.sin_addr)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            let code = errno
            // A class whose init throws still runs deinit: close once, or a second close could
            // hit a descriptor another thread (NIO) has since been given.
            close(fd)
            fd = -1
            throw TestFailure("connect() failed: errno \(code)")
        }
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    func send(_ text: String) throws {
        try send(Array(text.utf8))
    }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { throw TestFailure("send() failed: errno \(errno)") }
            offset += written
        }
    }

    func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// A larger receive buffer from now on (the window it advertises grows with it).
    func growReceiveBuffer(to bytes: Int32) {
        var size = bytes
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Everything the server sends until it closes, or until `timeout` seconds pass without a
    /// byte (then `closed` is false).
    func readUntilClosed(timeout: TimeInterval) -> (bytes: [UInt8], closed: Bool) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(timeout * 1000)) > 0 else { return (received, false) }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return (received, true) }
            received += buffer[0..<count]
        }
    }

    /// One response (head and a `Content-Length` body), or nil if none came within `timeout`.
    func readResponse(prefix: [UInt8] = [], timeout: TimeInterval) -> RawResponse? {
        var received = prefix
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            if let response = RawResponse(parsing: received) { return response }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(timeout * 1000)) > 0 else { return nil }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return RawResponse(parsing: received) }
            received += buffer[0..<count]
        }
    }
}

struct RawResponse: Sendable {
    var status: Int
    var headers: [String: String]
    var body: String

    /// Parses one complete response from the front of `bytes`; nil while it is incomplete.
    init?(parsing bytes: [UInt8]) {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let end = bytes.indices.dropLast(3).first(where: { Array(bytes[$0..<$0 + 4]) == separator }) else { return nil }
        let head = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        guard let statusLine = head.first, statusLine.count >= 12, let code = Int(statusLine.dropFirst(9).prefix(3)) else { return nil }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let length = headers["content-length"].flatMap(Int.init) ?? 0
        let bodyStart = end + 4
        guard bytes.count >= bodyStart + length else { return nil }
        status = code
        self.headers = headers
        body = String(decoding: bytes[bodyStart..<bodyStart + length], as: UTF8.self)
    }

    var json: [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any]
    }
}

/// One request on a fresh connection (`Connection: close`), answer parsed.
func rawRequest(port: Int, _ method: String, _ path: String, json: String? = nil, token: String? = nil, form: String? = nil,
                headers: [String: String] = [:], timeout: TimeInterval = 20) throws -> RawResponse {
    let socket = try RawSocket(port: port)
    try socket.send(rawRequestText(method, path, json: json, token: token, form: form, headers: headers))
    guard let response = socket.readResponse(timeout: timeout) else {
        throw TestFailure("no answer to \(method) \(path) within \(timeout) s")
    }
    return response
}

/// The bytes of a request with `Connection: close`.
func rawRequestText(_ method: String, _ path: String, json: String? = nil, token: String? = nil, form: String? = nil,
                    headers: [String: String] = [:]) -> String {
    var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    for (name, value) in headers.sorted(by: { $0.key < $1.key }) { text += "\(name): \(value)\r\n" }
    if let token { text += "Authorization: Bearer \(token)\r\n" }
    if let json {
        text += "Content-Type: application/json\r\nContent-Length: \(json.utf8.count)\r\n\r\n\(json)"
    } else if let form {
        text += "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: \(form.utf8.count)\r\n\r\n\(form)"
    } else {
        text += "\r\n"
    }
    return text
}
