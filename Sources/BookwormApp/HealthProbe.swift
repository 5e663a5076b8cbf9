import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Asks the server on this machine whether it is ready: `GET /health/ready` on 127.0.0.1 must
/// answer 200 within the timeout. Plain sockets: the runtime image has no curl.
package enum HealthProbe {
    package static func ready(port: Int, timeoutSeconds: Int = 3) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return false }
        let request = Array("GET /health/ready HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
        guard send(fd, request, request.count, 0) == request.count else { return false }
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = recv(fd, &buffer, buffer.count, 0)
        guard count >= 12 else { return false }
        return String(decoding: buffer[0..<12], as: UTF8.self) == "HTTP/1.1 200"
    }
}
