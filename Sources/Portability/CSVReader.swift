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

    static func records(_ text: String) throws(Malformed) -> [Record] {
        var records: [Record] = []
        var fields: [String] = []
        var field = ""
        var quoted = false
        var atFieldStart = true
        var line = 1
        var recordLine = 1
        var scalars = text.unicodeScalars.makeIterator()
        var pending: Unicode.Scalar? = nil
        var first = true
        func next() -> Unicode.Scalar? {
            if let scalar = pending { pending = nil; return scalar }
            return scalars.next()
        }
        while let scalar = next() {
            if first { first = false; if scalar == "\u{FEFF}" { continue } }
            if quoted {
                if scalar == "\"" {
                    let following = next()
                    if following == "\"" { field.unicodeScalars.append("\""); continue }
                    quoted = false
                    pending = following
                } else {
                    if scalar == "\n" { line += 1 }
                    field.unicodeScalars.append(scalar)
                }
                continue
            }
            switch scalar {
            case "\"" where atFieldStart:
                quoted = true
                atFieldStart = false
            case ",":
                fields.append(field)
                field = ""
                atFieldStart = true
            case "\r":
                continue
            case "\n":
                fields.append(field)
                if !(fields.count == 1 && fields[0].isEmpty) { records.append(Record(line: recordLine, fields: fields)) }
                fields = []
                field = ""
                atFieldStart = true
                line += 1
                recordLine = line
            default:
                field.unicodeScalars.append(scalar)
                atFieldStart = false
            }
        }
        if quoted { throw Malformed(line: recordLine, message: "a quoted field is never closed") }
        if !field.isEmpty || !fields.isEmpty {
            fields.append(field)
            records.append(Record(line: recordLine, fields: fields))
        }
        return records
    }
}
