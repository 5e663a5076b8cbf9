import BookwormCore
import Foundation

/// The API's rules for account fields (API.md, Accounts). Each returns the normalised value or
/// throws a validation error naming the field.
package enum AccountValidation {
    package static func username(_ raw: String, field: String = "username") throws -> String {
        let value = raw.trimmingCharacters(in: .whitespaces).lowercased()
        guard (3...30).contains(value.count),
              value.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }) else {
            throw AppError.invalid(field, "must be 3 to 30 characters of a-z, 0-9 and _")
        }
        return value
    }

    /// Trimmed; lower-cased for comparison. A pragmatic shape check: one `@`, a non-empty local
    /// part, a dotted domain, no spaces or control characters, RFC 5321 lengths.
    package static func email(_ raw: String) throws -> (display: String, normalized: String) {
        let value = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        // Counted and split by code point, as the schema's pattern reads it: a grapheme such as
        // "." followed by a skin-tone modifier must still count as a dot.
        let scalars = Array(value.unicodeScalars)
        let whitespace = CharacterSet.whitespacesAndNewlines
        let parts = scalars.split(separator: "@", omittingEmptySubsequences: false)
        // The schema's maxLength counts the raw value, spaces around it included.
        guard raw.unicodeScalars.count <= 254, parts.count == 2,
              let local = parts.first, let domain = parts.last,
              (1...64).contains(local.count), domain.count >= 3,
              domain.contains("."), domain.first != ".", domain.last != ".",
              !zip(domain, domain.dropFirst()).contains(where: { $0 == "." && $1 == "." }),
              scalars.allSatisfy({ $0.value > 0x20 && !(0x7f...0x9f).contains($0.value) && !whitespace.contains($0)
                  && !"<>()[],;:\\\"".unicodeScalars.contains($0) })
        else {
            throw AppError.invalid("email", "must be an email address such as name@example.org")
        }
        return (value, value.lowercased())
    }

    package static func password(_ value: String, field: String = "password") throws -> String {
        // Code points, as the schema's minLength/maxLength and PostgreSQL's char_length count.
        guard (10...128).contains(value.unicodeScalars.count) else {
            throw AppError.invalid(field, "must be 10 to 128 characters")
        }
        return value
    }

    package static func displayName(_ raw: String?) throws -> String? {
        try text(raw, field: "display_name", maxLength: 80, allowNewlines: false)
    }

    package static func bio(_ raw: String?) throws -> String? {
        try text(raw, field: "bio", maxLength: 1000, allowNewlines: true)
    }

    /// Trimmed free text; empty becomes nil; control characters (but newlines where allowed)
    /// are refused so nothing invisible is stored.
    package static func text(_ raw: String?, field: String, maxLength: Int, allowNewlines: Bool) throws -> String? {
        guard let raw else { return nil }
        let value = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        if value.isEmpty { return nil }
        guard value.unicodeScalars.count <= maxLength else {
            throw AppError.invalid(field, "must be at most \(maxLength) characters")
        }
        let badControl = value.unicodeScalars.contains { scalar in
            scalar.properties.generalCategory == .control && !(allowNewlines && (scalar == "\n" || scalar == "\r" || scalar == "\t"))
        }
        guard !badControl else {
            throw AppError.invalid(field, "must not contain control characters")
        }
        return value
    }
}
