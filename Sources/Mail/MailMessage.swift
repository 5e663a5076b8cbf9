import BookwormCore
import Foundation

/// A plain-text UTF-8 email, rendered to RFC 5322 bytes once, when it is queued. Header
/// values come from validated data and are cleaned again here: a CR or LF never reaches a
/// header, non-ASCII text is RFC 2047-encoded, long text is cut. The body is quoted-printable,
/// so any text (a lone "." line, very long lines, any script) arrives intact over 7-bit SMTP.
package struct MailMessage: Sendable, Equatable {
    let messageID: String
    let from: String
    let to: String
    let replyTo: String?
    let subject: String
    let body: String
    let date: Date

    /// `<random@domain>`, the domain taken from the sender's address.
    static func newMessageID(from address: String) -> String {
        let domain = MailAddress.domain(of: address) ?? "bookworm.invalid"
        return "<\(SecureRandom.base64URL(SecureRandom.bytes(18)))@\(domain)>"
    }

    func rendered() -> String {
        var headers = [
            "Message-ID: \(MailHeader.clean(messageID, limit: 200))",
            "Date: \(MailHeader.date(date))",
            "From: \(MailHeader.mailbox(from))",
            "To: \(MailHeader.mailbox(to))",
        ]
        if let replyTo { headers.append("Reply-To: \(MailHeader.mailbox(replyTo))") }
        headers += [
            "Subject: \(MailHeader.encodedText(subject, limit: 200))",
            "MIME-Version: 1.0",
            "Content-Type: text/plain; charset=utf-8",
            "Content-Transfer-Encoding: quoted-printable",
            "Auto-Submitted: auto-generated",
        ]
        return headers.joined(separator: "\r\n") + "\r\n\r\n" + QuotedPrintable.encode(body)
    }
}

enum MailHeader {
    /// Control characters (CR and LF among them) become spaces, runs of space collapse, and
    /// the text is cut to `limit` characters.
    static func clean(_ text: String, limit: Int) -> String {
        let scalars = text.unicodeScalars.map { $0.properties.generalCategory == .control ? " " : Character($0) }
        let collapsed = String(scalars).split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
        return String(collapsed.prefix(limit))
    }

    /// ASCII text as it is; anything else as RFC 2047 encoded-words of at most 75 characters,
    /// folded onto continuation lines.
    static func encodedText(_ text: String, limit: Int) -> String {
        let value = clean(text, limit: limit)
        if value.unicodeScalars.allSatisfy({ $0.isASCII }) { return fold(value) }
        var words: [String] = []
        var chunk = ""
        for character in value {
            // 45 bytes of UTF-8 make 60 base64 characters: with "=?UTF-8?B?" and "?=", 72.
            if (chunk + String(character)).utf8.count > 45 {
                words.append(encodedWord(chunk))
                chunk = ""
            }
            chunk.append(character)
        }
        if !chunk.isEmpty { words.append(encodedWord(chunk)) }
        return words.joined(separator: "\r\n ")
    }

    private static func encodedWord(_ text: String) -> String {
        "=?UTF-8?B?\(Data(text.utf8).base64EncodedString())?="
    }

    /// Breaks long ASCII header text at spaces so no line passes 78 characters where it can help.
    private static func fold(_ text: String) -> String {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ", omittingEmptySubsequences: false) {
            if !line.isEmpty, line.count + word.count + 1 > 70 {
                lines.append(line)
                line = String(word)
            } else {
                line = line.isEmpty ? String(word) : line + " " + word
            }
        }
        lines.append(line)
        return lines.joined(separator: "\r\n ")
    }

    /// `Name <address>` or a bare address; the name RFC 2047-encoded when not plain ASCII.
    static func mailbox(_ value: String) -> String {
        let (name, address) = MailAddress.split(value)
        let cleanAddress = clean(address, limit: 254).replacingOccurrences(of: " ", with: "")
        guard let name, !name.isEmpty else { return cleanAddress }
        let cleanName = clean(name, limit: 100)
        let safe = cleanName.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || " .-_".unicodeScalars.contains($0)) }
        let shown = safe ? cleanName : encodedText(cleanName, limit: 100)
        return "\(shown) <\(cleanAddress)>"
    }

    static func date(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss '+0000'"
        return formatter.string(from: date)
    }
}

enum MailAddress {
    /// ("Name", "address") from `Name <address>`, or (nil, text) for a bare address.
    static func split(_ value: String) -> (name: String?, address: String) {
        guard let open = value.lastIndex(of: "<"), let close = value.lastIndex(of: ">"), open < close else {
            return (nil, value.trimmingCharacters(in: .whitespaces))
        }
        let name = value[..<open].trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        return (name.isEmpty ? nil : name, String(value[value.index(after: open)..<close]))
    }

    static func domain(of value: String) -> String? {
        let address = split(value).address
        guard let at = address.lastIndex(of: "@") else { return nil }
        let domain = address[address.index(after: at)...]
        return domain.isEmpty ? nil : String(domain)
    }

    /// A plausible single address with nothing that could break a header or an SMTP command.
    static func isValid(_ address: String) -> Bool {
        let parts = address.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, parts[1].contains("."), address.utf8.count <= 254 else { return false }
        return address.unicodeScalars.allSatisfy { $0.isASCII && $0.value > 32 && $0.value < 127 && !"<>()[]\\,;:\"".unicodeScalars.contains($0) }
    }
}

/// RFC 2045 quoted-printable, with CRLF line ends and every line-leading "." encoded, so the
/// text survives any SMTP hop unchanged.
enum QuotedPrintable {
    static func encode(_ text: String) -> String {
        let lines = text.replacingOccurrences(of: "\r\n", with: "\n").split(separator: "\n", omittingEmptySubsequences: false)
        return lines.map { encodeLine(Array($0.utf8)) }.joined(separator: "\r\n") + "\r\n"
    }

    private static func encodeLine(_ bytes: [UInt8]) -> String {
        var output = ""
        var lineLength = 0
        for (index, byte) in bytes.enumerated() {
            let isLast = index == bytes.count - 1
            let plain = (byte >= 33 && byte <= 126 && byte != 61) || (byte == 32 && !isLast)
            let leadingDot = byte == 46 && lineLength == 0
            let piece = plain && !leadingDot ? String(UnicodeScalar(byte)) : String(format: "=%02X", byte)
            if lineLength + piece.count > 75 {
                output += "=\r\n"
                lineLength = 0
            }
            output += lineLength == 0 && piece == "." ? "=2E" : piece
            lineLength += piece.count
        }
        return output
    }
}
