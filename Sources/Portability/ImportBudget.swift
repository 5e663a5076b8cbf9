import BookwormCore
import Foundation
import NIOCore
import ZIPFoundation

/// What reading an upload may cost, whatever the file says about itself: a file is refused
/// while it is read, before it is turned into objects, so no upload raises a process's memory
/// by more than a few times `maxInflatedBytes`.
struct ImportBudget: Sendable {
    /// A zip's members together are inflated at most this far; their headers' sizes are not
    /// trusted. A full export of 20,000 rows inflates to about 12 MiB.
    var maxInflatedBytes = 16 << 20
    /// The deepest nesting a JSON file may have: the exports nest four deep.
    var maxDepth = 32
    /// The longest CSV field, in characters: a Goodreads review fits, a 10 MiB field does not.
    var maxFieldCharacters = 64 << 10
    /// One JSON entry (a book, a copy) at most this long and holding at most `maxElementValues`
    /// objects, arrays and members, so that building it stays small: an export's entries are a
    /// few KiB.
    var maxElementBytes = 256 << 10
    var maxElementValues = 10_000
}

/// A JSON file's top-level elements, found byte by byte and handed over one at a time, so that
/// `JSONSerialization` only ever builds one element: the file's nesting and its element count
/// are refused as they are read, before any of it becomes objects.
enum JSONElements {
    enum Refused: Error {
        case tooDeep(Int)
        case tooMany
        case notJSON(line: Int)
        case tooLarge(line: Int)
    }

    /// One member of the top-level object (`key` its quoted name) or element of the top-level
    /// array; `line` is where it starts.
    struct Element {
        let key: Data?
        let value: Data
        let line: Int
    }

    /// Whether the top level was an object; throws past `maxDepth` or `maxElements`, or at an
    /// element past `budget`'s size. A UTF-8 byte-order mark is skipped.
    @discardableResult
    static func read(_ data: Data, maxDepth: Int, maxElements: Int, budget: ImportBudget = ImportBudget(),
                     _ visit: (Element) throws -> Void) throws -> Bool {
        var scan = Scan(data: data, maxDepth: maxDepth, maxElements: maxElements, budget: budget)
        try data.withUnsafeBytes { bytes in
            let first = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
            for offset in first..<bytes.count { try scan.step(bytes[offset], at: offset, visit) }
        }
        guard scan.depth == 0, scan.top != 0, !scan.inString else { throw Refused.notJSON(line: scan.line) }
        return scan.top == UInt8(ascii: "{")
    }

    private struct Scan {
        let data: Data
        let maxDepth: Int, maxElements: Int, budget: ImportBudget
        var depth = 0, line = 1, count = 0, values = 0
        var top: UInt8 = 0, closed = false
        var inString = false, escaped = false
        var start: Int?, startLine = 0, colon: Int?, valueStart: Int?

        init(data: Data, maxDepth: Int, maxElements: Int, budget: ImportBudget) {
            (self.data, self.maxDepth, self.maxElements, self.budget) = (data, maxDepth, maxElements, budget)
        }

        mutating func step(_ byte: UInt8, at offset: Int, _ visit: (Element) throws -> Void) throws {
            if byte == UInt8(ascii: "\n") { line += 1 }
            if inString {
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
                return
            }
            switch byte {
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"):
                return
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                if depth == 0 {
                    guard top == 0 else { throw Refused.notJSON(line: line) }
                    top = byte
                } else if depth == 1 {
                    begin(at: offset)
                }
                if depth >= 1 { try value() }
                depth += 1
                guard depth <= maxDepth else { throw Refused.tooDeep(maxDepth) }
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if depth == 1 { try end(at: offset, visit) }
                depth -= 1
                guard depth >= 0 else { throw Refused.notJSON(line: line) }
            case UInt8(ascii: ",") where depth == 1:
                try end(at: offset, visit)
            case UInt8(ascii: ","):
                guard depth > 0 else { throw Refused.notJSON(line: line) }
                try value()
            case UInt8(ascii: ":") where depth == 1:
                colon = offset
            default:
                guard depth > 0 else { throw Refused.notJSON(line: line) }
                if depth == 1 { begin(at: offset) }
                if byte == UInt8(ascii: "\"") { inString = true }
            }
        }

        /// One more object, array or member inside the current element, and its size so far.
        private mutating func value() throws {
            values += 1
            guard values <= budget.maxElementValues else { throw Refused.tooLarge(line: startLine) }
        }

        /// An element's first byte (an object member's key), or its value's after the colon.
        private mutating func begin(at offset: Int) {
            if start == nil {
                (start, startLine) = (offset, line)
            } else if top == UInt8(ascii: "{"), colon != nil, valueStart == nil {
                valueStart = offset
            }
            if top == UInt8(ascii: "["), valueStart == nil { valueStart = offset }
        }

        private mutating func end(at offset: Int, _ visit: (Element) throws -> Void) throws {
            defer { (start, colon, valueStart, values) = (nil, nil, nil, 0) }
            guard let start else { return }
            guard offset - start <= budget.maxElementBytes else { throw Refused.tooLarge(line: startLine) }
            count += 1
            guard count <= maxElements else { throw Refused.tooMany }
            guard let valueStart else { throw Refused.notJSON(line: startLine) }
            let base = data.startIndex
            let key = top == UInt8(ascii: "{") ? colon.map { data[(base + start)..<(base + $0)] } : nil
            try visit(Element(key: key, value: data[(base + valueStart)..<(base + offset)], line: startLine))
        }
    }

    /// `read`, its refusals as the import's errors about `file`, `limit` the rows it may hold.
    @discardableResult
    static func read(_ data: Data, file: String, budget: ImportBudget, maxElements: Int, limit: Int,
                     _ visit: (Element) throws -> Void) throws -> Bool {
        do {
            return try read(data, maxDepth: budget.maxDepth, maxElements: maxElements, budget: budget, visit)
        } catch let error as Refused {
            switch error {
            case .tooDeep(let depth): throw AppError.invalid("file", "\(file) nests deeper than \(depth) levels")
            case .tooMany: throw AppError.invalid("file", "has more than \(limit) rows")
            case .notJSON(let line): throw AppError.invalid("file", "\(file) is not JSON (line \(line))")
            case .tooLarge(let line):
                throw AppError.invalid("file", "\(file): the entry at line \(line) is larger than \(budget.maxElementBytes >> 10) KiB "
                    + "or holds more than \(budget.maxElementValues) values")
            }
        }
    }

    /// An element's value as a JSON object, or nil.
    static func object(_ element: Element) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: element.value)) as? [String: Any]
    }

    /// An object member's name.
    static func key(_ element: Element) -> String? {
        element.key.flatMap { (try? JSONSerialization.jsonObject(with: $0, options: .fragmentsAllowed)) as? String }
    }
}

extension Archive {
    /// `entry`'s bytes, inflated no further than `budget` bytes whatever its header declares, and its
    /// CRC checked: ZIPFoundation computes the CRC while inflating and leaves the comparison to
    /// the caller.
    func boundedContents(of entry: Entry, budget: Int) throws -> Data {
        var bytes = Data()
        let checksum: CRC32
        do {
            checksum = try extract(entry, skipCRC32: false) { chunk in
                guard bytes.count + chunk.count <= budget else { throw AppError.invalid("file", "inflates past \(budget) bytes at \(entry.path)") }
                bytes.append(chunk)
            }
        } catch let refusal as AppError {
            throw refusal
        } catch {
            throw AppError.broken("file", "\(entry.path) cannot be read from the archive")
        }
        guard checksum == entry.checksum else { throw AppError.broken("file", "\(entry.path) is damaged: its CRC does not match") }
        return bytes
    }
}

/// An upload as it arrives: its size held to `limit`, its bytes handed on in parts of about
/// `partBytes` (1 MiB), so a process never holds more than a part of each upload.
struct ImportUpload {
    let limit: Int
    var partBytes = 1 << 20
    private(set) var received = 0
    private(set) var pending = ByteBuffer()

    init(limit: Int) { self.limit = limit }

    mutating func add(_ chunk: ByteBuffer) throws {
        received += chunk.readableBytes
        guard received <= limit else { throw AppError.payloadTooLarge(limit: limit) }
        var chunk = chunk
        pending.writeBuffer(&chunk)
    }

    /// The bytes gathered so far once they make a part (or, `final`, whatever is left).
    mutating func takePart(final: Bool = false) -> ByteBuffer? {
        guard pending.readableBytes >= partBytes || (final && pending.readableBytes > 0) else { return nil }
        defer { pending = ByteBuffer() }
        return pending
    }
}

/// What can be told of an upload from its first bytes, so that a file of the wrong kind is
/// refused at once (422) while reading the rest waits for the import job.
enum ImportSniff {
    /// How much of an upload is read before it is taken: enough for any export's header line.
    static let headBytes = 64 << 10

    static func check(_ data: Data, format: ImportFormat) throws {
        switch format {
        case .bookworm:
            // A local file header, or the end record of an empty archive.
            guard data.starts(with: [0x50, 0x4B, 0x03, 0x04]) || data.starts(with: [0x50, 0x4B, 0x05, 0x06]) else {
                throw AppError.broken("file", "is not a zip archive")
            }
        case .librarything:
            let first = data.prefix(4096).drop { [0x20, 0x0A, 0x0D, 0x09, 0xEF, 0xBB, 0xBF].contains($0) }.first
            guard first == UInt8(ascii: "{") || first == UInt8(ascii: "[") else { throw AppError.broken("file", "is not JSON") }
        case .goodreads:
            try header(data)
        }
    }

    /// The CSV's header line read and checked; a header longer than any export's is refused.
    private static func header(_ data: Data) throws {
        let limit = headBytes
        let head = data.prefix(limit)
        guard let end = head.firstIndex(of: UInt8(ascii: "\n")) ?? (data.count <= limit ? data.endIndex : nil) else {
            throw AppError.broken("file", "is not a Goodreads export: its first line is longer than \(limit) bytes")
        }
        var first: CSVReader.Record?
        do {
            try CSVReader.read(data[data.startIndex..<end], maxField: limit) { record in if first == nil { first = record } }
        } catch let error as CSVReader.Malformed {
            throw AppError.broken("file", "line \(error.line): \(error.message)")
        }
        guard let first else { throw AppError.broken("file", "is empty") }
        _ = try GoodreadsImport.columns(first)
    }
}
