import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Mail
@testable import BookwormApp
@testable import BookwormTestSupport

@Suite struct MailMessageTests {
    static let hostile = [
        "Evil\r\nBcc: victim@example.org",
        "line\nX-Injected: yes",
        "dot\r\n.\r\nMAIL FROM:<x@example.org>",
        String(repeating: "Łukasz Ñandú 書 ", count: 40),
        "Zoë \u{0}\u{7}\u{1b}[31m",
    ]

    @Test func aMessageIsDatedByTheServiceClock() {
        let clock = ManualClock(start: Date(timeIntervalSince1970: 1_900_000_000))
        let templates = MailTemplates(from: "Bookworm <no-reply@example.org>", publicBaseURL: "http://x", clock: clock)
        let message = templates.verification(to: "a@example.org", username: "a", code: "123456", token: "t")
        #expect(message.date == clock.now())
        #expect(message.rendered().contains("Date: Sun, 17 Mar 2030 17:46:40 +0000"))
    }

    /// Hostile names, titles and messages go through real SMTP: no extra header appears, every
    /// header stays one logical line, and the body arrives exactly as written.
    @Test func headerInjectionAttemptsAddNoHeaderAndLeaveTheBodyIntact() async throws {
        try await withSink { sink in
            try await withApp { app in
                let templates = MailTemplates(from: "Bookworm <no-reply@example.org>", publicBaseURL: "http://x", clock: app.clock)
                let outbox = OutboxStore(client: app.db, logger: Logger(label: "t"), clock: app.clock)
                for (index, text) in Self.hostile.enumerated() {
                    let body = "Hello\n.\nStill here \(index)\r\n\(text)\n" + String(repeating: "long line ", count: 50)
                    let message = templates.contact(to: "reader\(index)@example.org", recipient: "reader", sender: "sender_\(index)",
                                                    senderEmail: nil, bookTitle: text, text: body)
                    try await app.db.transaction(logger: Logger(label: "t")) { connection in
                        try await outbox.enqueue(message, kind: .contact, on: connection)
                    }
                }
                try await app.deliver(to: sink)
                let received = try await sink.waitForMessages(Self.hostile.count)
                let allowed: Set<String> = ["Message-ID", "Date", "From", "To", "Subject", "MIME-Version", "Content-Type",
                                            "Content-Transfer-Encoding", "Auto-Submitted"]
                for mail in received {
                    #expect(Set(mail.headers.map(\.name)).isSubset(of: allowed), "\(mail.headers.map(\.name))")
                    #expect(mail.headers.count == allowed.count)
                    #expect(mail.header("Bcc") == nil && mail.header("X-Injected") == nil)
                    let digits = try #require(mail.envelopeTo.firstMatch(of: /reader(\d+)@/)?.1)
                    let index = try #require(Int(digits))
                    let text = Self.hostile[index].replacingOccurrences(of: "\r\n", with: "\n")
                    #expect(mail.body.contains("Hello\n.\nStill here \(index)\n\(text)\n" + String(repeating: "long line ", count: 50)))
                    let subject = try #require(mail.decodedHeader("Subject"))
                    #expect(!subject.contains("\n") && !subject.contains("\r"))
                    for line in mail.raw.components(separatedBy: "\r\n") { #expect(line.utf8.count <= 998) }
                }
                let unicode = try #require(received.first { $0.envelopeTo.hasPrefix("reader3@") })
                #expect(unicode.header("Subject")?.contains("=?UTF-8?B?") == true)
                #expect(unicode.decodedHeader("Subject")?.contains("Łukasz Ñandú 書") == true)
            }
        }
    }

    @Test func renderedMessagesAreSevenBitWithEncodedWordsForNonASCII() throws {
        let message = MailMessage(messageID: "<id@example.org>", from: "Zoë Bücher <zoe@example.org>", to: "a@example.org",
                                  replyTo: "b@example.org", subject: "Grüße aus Köln", body: "Ünïcödé\n.leading dot\n", date: Date())
        let text = message.rendered()
        #expect(text.unicodeScalars.allSatisfy { $0.isASCII })
        #expect(text.contains("From: =?UTF-8?B?"))
        #expect(text.contains("Subject: =?UTF-8?B?"))
        #expect(text.contains("\r\n=2Eleading dot\r\n"))
        #expect(!text.contains("\n.") || !text.replacingOccurrences(of: "\r\n", with: "\n").contains("\n.\n"))
        #expect(QuotedPrintableDecoder.decode(String(text.split(separator: "\r\n\r\n", maxSplits: 1)[1])) == "Ünïcödé\n.leading dot\n\n")
    }

    @Test func smtpURLsRequireTLSUnlessOnLoopback() throws {
        #expect(try SMTPSettings(url: "smtp://user:secret@mail.example.org:587", timeoutSeconds: 5).tls == .startTLS)
        #expect(try SMTPSettings(url: "smtps://mail.example.org", timeoutSeconds: 5).tls == .implicit)
        #expect(try SMTPSettings(url: "smtp://127.0.0.1:2525?tls=none", timeoutSeconds: 5).tls == SMTPSettings.TLS.none)
        #expect(throws: ConfigError.self) { try SMTPSettings(url: "smtp://mail.example.org?tls=none", timeoutSeconds: 5) }
        #expect(throws: ConfigError.self) { try SMTPSettings(url: "http://mail.example.org", timeoutSeconds: 5) }
        let settings = try SMTPSettings(url: "smtp://user:secret@mail.example.org:587", timeoutSeconds: 5)
        #expect(!settings.description.contains("secret"))
        #expect(throws: ConfigError.self) { try Config.fromEnvironment(["MAIL_FROM": "Evil\r\nBcc: x@example.org <a@example.org>"]) }
    }
}
