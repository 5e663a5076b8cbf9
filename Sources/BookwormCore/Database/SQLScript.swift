/// Splits a migration file into single statements, because PostgreSQL's extended protocol
/// (the only one PostgresNIO speaks) takes one statement per query. Semicolons inside quotes,
/// quoted identifiers, dollar-quoted bodies and comments do not split.
enum SQLScript {
    static func statements(_ script: String) -> [String] {
        let chars = Array(script.unicodeScalars)
        var statements: [String] = []
        var current = String.UnicodeScalarView()
        var index = 0

        func flush() {
            let text = String(current).trimmingCharacters(in: .whitespacesAndNewlines)
            if !isOnlyComments(text) { statements.append(text) }
            current = String.UnicodeScalarView()
        }

        while index < chars.count {
            let char = chars[index]
            let next: Unicode.Scalar? = index + 1 < chars.count ? chars[index + 1] : nil
            if char == "-" && next == "-" {
                let end = chars[index...].firstIndex(of: "\n") ?? chars.count
                current.append(contentsOf: chars[index..<end])
                index = end
            } else if char == "/" && next == "*" {
                let end = closingIndex(of: ["*", "/"], in: chars, from: index + 2)
                current.append(contentsOf: chars[index..<end])
                index = end
            } else if char == "'" || char == "\"" {
                let end = closingIndex(of: [char], in: chars, from: index + 1)
                current.append(contentsOf: chars[index..<end])
                index = end
            } else if char == "$", let tag = dollarTag(in: chars, at: index) {
                let end = closingIndex(of: tag, in: chars, from: index + tag.count)
                current.append(contentsOf: chars[index..<end])
                index = end
            } else if char == ";" {
                flush()
                index += 1
            } else {
                current.append(char)
                index += 1
            }
        }
        flush()
        return statements
    }

    /// Index just past the first `terminator` at or after `start` (or the end of input).
    /// A doubled quote inside a quoted string is an escaped quote, and is skipped.
    private static func closingIndex(of terminator: [Unicode.Scalar], in chars: [Unicode.Scalar], from start: Int) -> Int {
        var index = start
        while index + terminator.count <= chars.count {
            if Array(chars[index..<index + terminator.count]) == terminator {
                let after = index + terminator.count
                if terminator.count == 1, (terminator[0] == "'" || terminator[0] == "\""),
                   after < chars.count, chars[after] == terminator[0] {
                    index = after + 1
                    continue
                }
                return after
            }
            index += 1
        }
        return chars.count
    }

    /// `$tag$` or `$$` starting at `index`, if that is what is there.
    private static func dollarTag(in chars: [Unicode.Scalar], at index: Int) -> [Unicode.Scalar]? {
        var end = index + 1
        while end < chars.count, chars[end] == "_" || chars[end].properties.isAlphabetic || (chars[end].value >= 48 && chars[end].value <= 57 && end > index + 1) {
            end += 1
        }
        guard end < chars.count, chars[end] == "$" else { return nil }
        return Array(chars[index...end])
    }

    private static func isOnlyComments(_ text: String) -> Bool {
        let meaningful = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("--") }
        return meaningful.isEmpty
    }
}

import Foundation
