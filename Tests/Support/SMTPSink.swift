import Foundation
@testable import BookwormCore
@testable import Mail
@testable import Accounts
@testable import Places
@testable import Catalog
@testable import Discovery
@testable import Exchange
@testable import BookwormApp

/// A real SMTP server process (aiosmtpd, `Tests/smtp_sink.py`) for one test, and what it
/// received. `make deps` installs aiosmtpd (Debian's python3-aiosmtpd).
final class SMTPSink: @unchecked Sendable {
    let folder: String
    let port: Int
    private let pid: pid_t

    var url: String { "smtp://127.0.0.1:\(port)?tls=none" }

    /// The service's SMTP transport pointed at this sink.
    func transport() throws -> SMTPTransport {
        SMTPTransport(settings: try SMTPSettings(url: url, timeoutSeconds: 10))
    }

    private init(folder: String, port: Int, pid: pid_t) {
        self.folder = folder
        self.port = port
        self.pid = pid
    }

    static func start() async throws -> SMTPSink {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("bookworm-sink-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("smtp_sink.py").path
        // Debian's interpreter, where python3-aiosmtpd is installed (a pyenv `python3` may lack it).
        // Spawned with default signal dispositions: Foundation's Process would pass on the
        // test process's ignored SIGTERM, and the sink could then never be stopped.
        let python = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "python3"
        let pid = try ChildProcess.spawn(python, [script, folder], outputPath: folder + "/sink.log")
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let text = try? String(contentsOfFile: folder + "/port", encoding: .utf8), let port = Int(text) {
                return SMTPSink(folder: folder, port: port, pid: pid)
            }
            if waitpid(pid, nil, WNOHANG) == pid { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        kill(pid, SIGKILL)
        ChildProcess.wait(pid)
        let log = (try? String(contentsOfFile: folder + "/sink.log", encoding: .utf8)) ?? ""
        throw TestFailure("the SMTP sink did not start (is python3-aiosmtpd installed? run `make deps`): \(log.suffix(1500))")
    }

    func stop() {
        kill(pid, SIGKILL)
        ChildProcess.wait(pid)
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// Every message received so far, oldest first.
    func messages() -> [ReceivedMail] {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasSuffix(".eml") }.sorted()
        return names.compactMap { name in
            (try? Data(contentsOf: URL(fileURLWithPath: folder + "/" + name))).map(ReceivedMail.init(raw:))
        }
    }

    /// Waits until at least `count` messages arrived.
    @discardableResult
    func waitForMessages(_ count: Int, timeout: TimeInterval = 20) async throws -> [ReceivedMail] {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let received = messages()
            if received.count >= count { return received }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TestFailure("expected \(count) messages, the sink has \(messages().count)")
    }
}

/// A received message taken apart: envelope, headers (unfolded, in order) and decoded body.
struct ReceivedMail: Sendable {
    let raw: String
    let envelopeTo: String
    /// The client's port: messages with the same one came over the same connection.
    let connection: String
    let headers: [(name: String, value: String)]
    let body: String

    init(raw data: Data) {
        raw = String(decoding: data, as: UTF8.self)
        let parts = raw.components(separatedBy: "\r\n\r\n")
        let headLines = (parts.first ?? "").replacingOccurrences(of: "\r\n ", with: " ").replacingOccurrences(of: "\r\n\t", with: " ")
            .components(separatedBy: "\r\n")
        var headers: [(String, String)] = []
        for line in headLines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        envelopeTo = headers.first { $0.0 == "X-Sink-Rcpt-To" }?.1 ?? ""
        connection = headers.first { $0.0 == "X-Sink-Peer" }?.1 ?? ""
        self.headers = headers.filter { !$0.0.hasPrefix("X-Sink-") }
        body = QuotedPrintableDecoder.decode(parts.dropFirst().joined(separator: "\r\n\r\n"))
    }

    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// RFC 2047 words decoded (B encoding, UTF-8), as a mail reader shows the header.
    func decodedHeader(_ name: String) -> String? {
        guard let value = header(name) else { return nil }
        let pattern = /=\?UTF-8\?B\?([A-Za-z0-9+\/=]*)\?=/
        var result = value.replacingOccurrences(of: "?= =?UTF-8?B?", with: "?==?UTF-8?B?")
        result = result.replacing(pattern) { match in
            String(decoding: Data(base64Encoded: String(match.1)) ?? Data(), as: UTF8.self)
        }
        return result
    }
}

enum QuotedPrintableDecoder {
    static func decode(_ text: String) -> String {
        let joined = text.replacingOccurrences(of: "=\r\n", with: "")
        var bytes: [UInt8] = []
        var iterator = Array(joined.utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "="), let high = iterator.next(), let low = iterator.next(),
               let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16) {
                bytes.append(value)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self).replacingOccurrences(of: "\r\n", with: "\n")
    }
}
