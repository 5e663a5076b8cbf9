import BookwormCore
import CCurl
import Foundation
import Logging

/// What happened to one message.
package enum DeliveryOutcome: Sendable, Equatable {
    case sent
    /// 4xx about this message: worth trying again later.
    case temporaryFailure(String)
    /// 421 or no answer at all: the server is not taking mail now, whatever the message. The
    /// message is tried again later, and the rest of its batch is not tried now (`OutboxWorker`).
    case serverUnavailable(String)
    /// 5xx: the server refused this message for good.
    case permanentFailure(String)
}

/// One message as a transport sees it.
package struct OutgoingMessage: Sendable {
    package let messageID: String
    package let envelopeFrom: String
    package let recipient: String
    /// RFC 5322 text with CRLF line ends.
    package let content: String

    package init(messageID: String, envelopeFrom: String, recipient: String, content: String) {
        self.messageID = messageID
        self.envelopeFrom = envelopeFrom
        self.recipient = recipient
        self.content = content
    }
}

/// Where mail goes. A session is one connection, kept across the batches of a drain
/// (`SessionKeeper`). Sessions block: a batch is sent on a thread of its own (`BatchSender`),
/// never on an event loop or Swift's cooperative pool, so one message follows the other with no
/// hop between threads.
package protocol MailTransport: Sendable {
    func openSession() throws -> any MailSession
}

package protocol MailSession: Sendable {
    /// Returns once the server has answered (or the transport's timeout has passed).
    func send(_ message: OutgoingMessage) -> DeliveryOutcome
    func close()
}
/// `SMTP_URL` taken apart: where, who, and how TLS is used.
package struct SMTPSettings: Sendable, CustomStringConvertible {
    package enum TLS: Int32, Sendable { case none = 0, startTLS = 1, implicit = 2 }
    package let url: String
    package let username: String?
    package let password: String?
    let tls: TLS
    let timeoutSeconds: Int

    /// `smtp://user:pass@host:587` requires STARTTLS; `smtps://` is implicit TLS;
    /// `?tls=none` (plaintext) only for a relay on loopback.
    package init(url text: String, timeoutSeconds: Int) throws {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
              ["smtp", "smtps"].contains(scheme), let host = components.host, !host.isEmpty else {
            throw ConfigError(variable: "SMTP_URL", message: "expected smtp://[user:pass@]host[:port] or smtps://…")
        }
        let plaintext = components.queryItems?.contains { $0.name == "tls" && $0.value == "none" } ?? false
        if plaintext {
            guard scheme == "smtp", ["127.0.0.1", "::1", "localhost", "[::1]"].contains(host.lowercased()) else {
                throw ConfigError(variable: "SMTP_URL", message: "tls=none is only allowed for smtp:// on loopback")
            }
        }
        tls = scheme == "smtps" ? .implicit : (plaintext ? .none : .startTLS)
        username = components.user?.removingPercentEncoding
        password = components.password?.removingPercentEncoding
        let port = components.port.map { ":\($0)" } ?? ""
        let shownHost = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        url = "\(scheme)://\(shownHost)\(port)"
        self.timeoutSeconds = timeoutSeconds
    }

    /// Never the password.
    package var description: String { "\(url) (tls: \(tls), user: \(username ?? "none"))" }
}

/// SMTP through libcurl (STARTTLS, AUTH and dot-stuffing are libcurl's), which blocks: it runs on
/// the batch's own thread.
package struct SMTPTransport: MailTransport {
    package let settings: SMTPSettings

    package init(settings: SMTPSettings) { self.settings = settings }

    package func openSession() throws -> any MailSession {
        guard let handle = bw_smtp_open(settings.url, settings.username, settings.password, settings.tls.rawValue,
                                        settings.timeoutSeconds) else {
            throw AppError.unavailable("libcurl could not start an SMTP handle")
        }
        return SMTPSession(handle: handle)
    }
}

/// The libcurl handle, used by one batch's thread at a time (`SessionKeeper` hands it on).
struct SMTPSession: MailSession, @unchecked Sendable {
    let handle: OpaquePointer

    func send(_ message: OutgoingMessage) -> DeliveryOutcome {
        let result = bw_smtp_send(handle, message.envelopeFrom, message.recipient, message.content, message.content.utf8.count)
        return Self.outcome(curlCode: result.curl_code, smtpCode: result.smtp_code, error: Self.text(result))
    }

    /// 2xx sent; 5xx refused for good; 421 (the server is closing or too busy), no answer or a
    /// network error: the server is unavailable; any other 4xx: try this message again.
    static func outcome(curlCode: Int32, smtpCode: Int, error: String) -> DeliveryOutcome {
        if curlCode == 0 { return .sent }
        switch smtpCode {
        case 500...599: return .permanentFailure("\(smtpCode) \(error)")
        case 421: return .serverUnavailable("\(smtpCode) \(error)")
        case 400...499: return .temporaryFailure("\(smtpCode) \(error)")
        default: return .serverUnavailable(error)
        }
    }

    private static func text(_ result: bw_smtp_result) -> String {
        var copy = result
        return withUnsafeBytes(of: &copy.error) { buffer in
            String(decoding: buffer.prefix { $0 != 0 }, as: UTF8.self)
        }
    }

    func close() { bw_smtp_close(handle) }
}

/// Without `SMTP_URL`: each message becomes a file in a maildir under the data folder
/// (`mail/new/<time>.<id>.eml`, written to `tmp/` first and renamed, so a reader never sees half
/// a file). The path is logged, so a developer can read what was sent.
package struct MaildirTransport: MailTransport, MailSession {
    let directory: String
    package let logger: Logger

    package init(directory: String, logger: Logger) {
        self.directory = directory
        self.logger = logger
    }

    package func openSession() throws -> any MailSession {
        for folder in ["tmp", "new", "cur"] {
            try FileManager.default.createDirectory(atPath: directory + "/" + folder, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        }
        return self
    }

    package func send(_ message: OutgoingMessage) -> DeliveryOutcome {
        let name = "\(Int(Date().timeIntervalSince1970 * 1000)).\(UUID().uuidString.lowercased()).eml"
        let temporary = directory + "/tmp/" + name
        let final = directory + "/new/" + name
        do {
            let envelope = "Return-Path: <\(message.envelopeFrom)>\r\nDelivered-To: \(message.recipient)\r\n"
            try Data((envelope + message.content).utf8).write(to: URL(fileURLWithPath: temporary), options: .atomic)
            try FileManager.default.moveItem(atPath: temporary, toPath: final)
        } catch {
            return .temporaryFailure("maildir: \(error)")
        }
        logger.info("mail written", metadata: ["path": .string(final), "message_id": .string(message.messageID)])
        return .sent
    }

    package func close() {}
}
