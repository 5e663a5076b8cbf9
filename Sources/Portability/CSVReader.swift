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
    ///
    /// Read byte by byte: the four bytes that shape a record (`"`, `,`, CR, LF) are ASCII, which
    /// never occurs inside a UTF-8 sequence, so a field's bytes are gathered as they come and
    /// checked as UTF-8 once, when it ends. Decoding scalar by scalar and appending each to a
    /// `String` cost an import of ten 10 MiB files half the server's CPU.
    static func read(_ data: Data, maxField: Int, maxFields: Int = 256, _ visit: (Record) throws -> Void) throws {
        try data.withUnsafeBytes { raw in
            var reader = Bytes(maxField: maxField, maxFields: maxFields)
            var bytes = raw[...]
            if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
            try reader.read(bytes, visit)
        }
    }

    private struct Bytes {
        let maxField: Int
        let maxFields: Int
        var fields: [String] = []
        var field: [UInt8] = []
        /// Characters (scalars) in `field`: every byte but UTF-8's continuation bytes starts one.
        var fieldLength = 0
        var quoted = false
        var atFieldStart = true
        /// The line being read, and the line the record being read starts on.
        var line = 1
        var recordLine = 1

        init(maxField: Int, maxFields: Int) {
            self.maxField = maxField
            self.maxFields = maxFields
        }

        mutating func read(_ bytes: Slice<UnsafeRawBufferPointer>, _ visit: (Record) throws -> Void) throws {
            var index = bytes.startIndex
            while index < bytes.endIndex {
                let byte = bytes[index]
                index += 1
                if quoted {
                    if byte == UInt8(ascii: "\"") {
                        // A doubled quote is one quote; any other byte after a quote ends the quoting
                        // and is read as if unquoted.
                        if index < bytes.endIndex, bytes[index] == UInt8(ascii: "\"") {
                            index += 1
                            try append(byte)
                        } else {
                            quoted = false
                        }
                    } else {
                        if byte == UInt8(ascii: "\n") { line += 1 }
                        try append(byte)
                    }
                    continue
                }
                switch byte {
                case UInt8(ascii: "\"") where atFieldStart:
                    quoted = true
                    atFieldStart = false
                case UInt8(ascii: ","):
                    // A comma always has a field after it.
                    guard fields.count + 1 < maxFields else { throw Malformed(line: recordLine, message: "has more than \(maxFields) fields") }
                    try endField()
                    atFieldStart = true
                case UInt8(ascii: "\r"):
                    continue
                case UInt8(ascii: "\n"):
                    try endField()
                    if !(fields.count == 1 && fields[0].isEmpty) { try visit(Record(line: recordLine, fields: fields)) }
                    fields.removeAll(keepingCapacity: true)
                    atFieldStart = true
                    line += 1
                    recordLine = line
                default:
                    try append(byte)
                    atFieldStart = false
                }
            }
            if quoted { throw Malformed(line: recordLine, message: "a quoted field is never closed") }
            if !field.isEmpty || !fields.isEmpty {
                try endField()
                try visit(Record(line: recordLine, fields: fields))
            }
        }

        private mutating func append(_ byte: UInt8) throws(Malformed) {
            if byte & 0xC0 != 0x80 {
                fieldLength += 1
                guard fieldLength <= maxField else { throw Malformed(line: recordLine, message: "a field is longer than \(maxField) characters") }
            } else if field.count >= 4 * maxField {
                // Past four bytes a character, continuation bytes are not UTF-8, and counted as no
                // character they would grow the field without bound.
                throw Malformed(line: line, message: "is not UTF-8 text")
            }
            field.append(byte)
        }

        private mutating func endField() throws(Malformed) {
            guard let text = String(validating: field, as: UTF8.self) else {
                throw Malformed(line: lineOfFirstInvalidByte(), message: "is not UTF-8 text")
            }
            fields.append(text)
            field.removeAll(keepingCapacity: true)
            fieldLength = 0
        }

        /// The line of the field's first byte that is not UTF-8: a quoted field may span lines.
        private func lineOfFirstInvalidByte() -> Int {
            var parser = Unicode.UTF8.ForwardParser(), bytes = field.makeIterator(), valid = 0
            while case .valid(let scalar) = parser.parseScalar(from: &bytes) { valid += scalar.count }
            return line - field[valid...].count { $0 == UInt8(ascii: "\n") }
        }
    }
}
