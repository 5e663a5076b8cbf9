import Foundation

/// RFC 4180 CSV as exporters write it: quoted fields may hold commas, doubled quotes and line
/// breaks; lines end in LF or CRLF; a byte-order mark is skipped. Each record carries the file
/// line it starts on (the header is line 1), which is how import errors name it.
struct CSVReader {
    struct Record {
        let line: Int
        let fields: [String]
    }

    struct Malformed: Error {
        let line: Int
        let message: String
    }

    /// Hands `visit` each record as soon as it is read, so a file's rows are never all in memory
    /// at once, and refuses a field longer than `maxField` characters, or a record of more than
    /// `maxFields` fields, as it grows.
    /// The bytes are decoded as UTF-8 as they are read (no copy of the file as a `String`).
    static func read(_ data: Data, maxField: Int, maxFields: Int = 256, _ visit: (Record) throws -> Void) throws {
        var fields: [String] = []
        var field = ""
        var quoted = false
        var atFieldStart = true
        var line = 1
        var recordLine = 1
        var bytes = data.makeIterator()
        var utf8 = Unicode.UTF8()
        var pending: Unicode.Scalar? = nil
        var first = true
        var fieldLength = 0
        func append(_ scalar: Unicode.Scalar) throws(Malformed) {
            fieldLength += 1
            guard fieldLength <= maxField else { throw Malformed(line: recordLine, message: "a field is longer than \(maxField) characters") }
            field.unicodeScalars.append(scalar)
        }
        func next() throws(Malformed) -> Unicode.Scalar? {
            if let scalar = pending { pending = nil; return scalar }
            switch utf8.decode(&bytes) {
            case .scalarValue(let scalar): return scalar
            case .emptyInput: return nil
            case .error: throw Malformed(line: line, message: "is not UTF-8 text")
            }
        }
        while let scalar = try next() {
            if first { first = false; if scalar == "\u{FEFF}" { continue } }
            if quoted {
                if scalar == "\"" {
                    let following = try next()
                    if following == "\"" { try append("\""); continue }
                    quoted = false
                    pending = following
                } else {
                    if scalar == "\n" { line += 1 }
                    try append(scalar)
                }
                continue
            }
            switch scalar {
            case "\"" where atFieldStart:
                quoted = true
                atFieldStart = false
            case ",":
                // A comma always has a field after it.
                guard fields.count + 1 < maxFields else { throw Malformed(line: recordLine, message: "has more than \(maxFields) fields") }
                fields.append(field)
                field = ""; fieldLength = 0
                atFieldStart = true
            case "\r":
                continue
            case "\n":
                fields.append(field)
                if !(fields.count == 1 && fields[0].isEmpty) { try visit(Record(line: recordLine, fields: fields)) }
                fields = []
                field = ""; fieldLength = 0
                atFieldStart = true
                line += 1
                recordLine = line
            default:
                try append(scalar)
                atFieldStart = false
            }
        }
        if quoted { throw Malformed(line: recordLine, message: "a quoted field is never closed") }
        if !field.isEmpty || !fields.isEmpty {
            fields.append(field)
            try visit(Record(line: recordLine, fields: fields))
        }
    }
}
