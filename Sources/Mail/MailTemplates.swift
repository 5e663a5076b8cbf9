import BookwormCore
import Foundation

/// Every email the service writes. Values are the service's own or validated input; the
/// message builder cleans headers again, so user text can only ever land in the body.
package struct MailTemplates: Sendable {
    package let from: String
    package let publicBaseURL: String
    /// Dates each message (its `Date` header).
    let clock: any AppClock

    package init(from: String, publicBaseURL: String, clock: any AppClock) {
        self.from = from
        self.publicBaseURL = publicBaseURL
        self.clock = clock
    }

    private func message(to: String, replyTo: String? = nil, subject: String, body: String) -> MailMessage {
        MailMessage(messageID: MailMessage.newMessageID(from: from), from: from, to: to, replyTo: replyTo,
                    subject: subject, body: body, date: clock.now())
    }

    /// The code is for the app; the link (a day long) is for a browser.
    package func verification(to address: String, username: String, code: String, token: String) -> MailMessage {
        message(to: address, subject: "Confirm your email address for Bookworm", body: """
            Hello \(username),

            Your code to confirm this email address on Bookworm is:

                \(code)

            It works for 30 minutes. Or open this link, which works for a day:

            \(page("verify-email", token: token))

            If you did not sign up for Bookworm, ignore this email.
            """)
    }

    /// A page of ours, with its token, from `PUBLIC_BASE_URL`.
    func page(_ path: String, token: String) -> String {
        let base = publicBaseURL.hasSuffix("/") ? String(publicBaseURL.dropLast()) : publicBaseURL
        return "\(base)/\(path)?token=\(token)"
    }

    package func passwordReset(to address: String, username: String, token: String) -> MailMessage {
        let link = page("reset-password", token: token)
        return message(to: address, subject: "Reset your Bookworm password", body: """
            Hello \(username),

            Someone asked to reset the password of your Bookworm account. To choose a new one, open:

            \(link)

            The link works once, for one hour. If it was not you, ignore this email: your password stays as it is.
            """)
    }

    /// From the service's address, never the sender's; `Reply-To` is the sender's address only
    /// when they chose to share it. The recipient's address appears nowhere the sender can see.
    package func contact(to address: String, recipient: String, sender: String, senderEmail: String?,
                 bookTitle: String?, text: String) -> MailMessage {
        let about = bookTitle.map { " about \"\($0)\"" } ?? ""
        let howToReply = senderEmail == nil
            ? "\(sender) did not share an email address; answer through Bookworm."
            : "Reply to this email to answer \(sender) directly (this shares your address with them)."
        return message(to: address, replyTo: senderEmail, subject: "\(sender) on Bookworm\(about)", body: """
            Hello \(recipient),

            \(sender) sent you a message on Bookworm\(about):

            \(text)

            --
            \(howToReply)
            To stop hearing from \(sender), block them in the app.
            """)
    }

    /// A notice about something that happened on the service (trades, reminders): the text is
    /// the service's own, with user-chosen names and titles inside.
    package func notice(to address: String, recipient: String, subject: String, text: String) -> MailMessage {
        message(to: address, subject: subject, body: """
            Hello \(recipient),

            \(text)

            --
            Bookworm. Answer through the app: this address does not read replies.
            """)
    }
}
