import BookwormCore
/// An ISBN normalised to ISBN-13, accepting ISBN-10 or ISBN-13 with hyphens or spaces.
/// Checksums are verified; an ISBN-10 becomes its 978 ISBN-13. A 979 ISBN has no ISBN-10.
package struct ISBN: Equatable, Sendable {
    package let isbn13: String

    var isbn10: String? {
        guard isbn13.hasPrefix("978") else { return nil }
        let body = Array(isbn13.dropFirst(3).prefix(9)).compactMap { $0.wholeNumberValue }
        let sum = body.enumerated().reduce(0) { $0 + $1.element * (10 - $1.offset) }
        let check = (11 - sum % 11) % 11
        return String(isbn13.dropFirst(3).prefix(9)) + (check == 10 ? "X" : String(check))
    }

    package enum Problem: Error, Equatable {
        case shape, checksum, prefix
        package var message: String {
            switch self {
            case .shape: "must be an ISBN-10 or ISBN-13 (digits, hyphens and spaces; ISBN-10 may end in X)"
            case .checksum: "has a wrong check digit"
            case .prefix: "an ISBN-13 starts with 978 or 979"
            }
        }
    }

    package init(_ raw: String) throws(Problem) {
        let compact = raw.filter { $0 != "-" && $0 != " " }.uppercased()
        guard compact.allSatisfy({ $0.isASCII }) else { throw .shape }
        switch compact.count {
        case 10:
            let digits = compact.prefix(9).compactMap { $0.wholeNumberValue }
            guard digits.count == 9, let last = compact.last else { throw .shape }
            let check: Int
            if last == "X" { check = 10 } else if let value = last.wholeNumberValue { check = value } else { throw .shape }
            let sum = digits.enumerated().reduce(0) { $0 + $1.element * (10 - $1.offset) } + check
            guard sum % 11 == 0 else { throw .checksum }
            isbn13 = Self.withCheckDigit("978" + String(compact.prefix(9)))
        case 13:
            let digits = compact.compactMap { $0.wholeNumberValue }
            guard digits.count == 13 else { throw .shape }
            guard compact.hasPrefix("978") || compact.hasPrefix("979") else { throw .prefix }
            guard Self.withCheckDigit(String(compact.prefix(12))) == compact else { throw .checksum }
            isbn13 = compact
        default:
            throw .shape
        }
    }

    /// Appends the ISBN-13 check digit to twelve digits.
    package static func withCheckDigit(_ twelve: String) -> String {
        let sum = twelve.compactMap { $0.wholeNumberValue }.enumerated()
            .reduce(0) { $0 + $1.element * ($1.offset % 2 == 0 ? 1 : 3) }
        return twelve + String((10 - sum % 10) % 10)
    }
}
