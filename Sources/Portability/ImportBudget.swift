import BookwormCore
import Foundation
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
}

/// A JSON text's shape, checked byte by byte before `JSONSerialization` builds anything: its
/// nesting and the number of elements of its top-level array or object.
enum JSONShape {
    enum Refused: Error {
        case tooDeep(Int)
        case tooMany
    }

    /// The top level's element count; throws past `maxDepth` or `maxElements`.
    @discardableResult
    static func check(_ data: Data, maxDepth: Int, maxElements: Int) throws(Refused) -> Int {
        var depth = 0, elements = 0, inString = false, escaped = false, topHasValue = false
        for byte in data {
            if inString {
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
                if depth == 1 { topHasValue = true }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""):
                inString = true
                if depth == 1 { topHasValue = true }
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                if depth == 1 { topHasValue = true }
                depth += 1
                guard depth <= maxDepth else { throw Refused.tooDeep(maxDepth) }
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                if depth == 1, topHasValue { elements += 1 }
                depth -= 1
            case UInt8(ascii: ",") where depth == 1:
                elements += 1
                topHasValue = false
                guard elements <= maxElements else { throw Refused.tooMany }
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"):
                break
            default:
                if depth == 1 { topHasValue = true }
            }
        }
        guard elements <= maxElements else { throw Refused.tooMany }
        return elements
    }

    /// `check`, its refusal as the import's error about `file`.
    @discardableResult
    static func check(_ data: Data, file: String, budget: ImportBudget, maxElements: Int, limit: Int) throws -> Int {
        do { return try check(data, maxDepth: budget.maxDepth, maxElements: maxElements) } catch {
            switch error {
            case .tooDeep(let depth): throw AppError.invalid("file", "\(file) nests deeper than \(depth) levels")
            case .tooMany: throw AppError.invalid("file", "has more than \(limit) rows")
            }
        }
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

/// What can be told of an upload from its first bytes, so that a file of the wrong kind is
/// refused at once (422) while reading the rest waits for the import job.
enum ImportSniff {
    static func check(_ data: Data, format: ImportFormat) throws {
        switch format {
        case .bookworm:
            // A local file header, or the end record of an empty archive.
            guard data.starts(with: [0x50, 0x4B, 0x03, 0x04]) || data.starts(with: [0x50, 0x4B, 0x05, 0x06]) else {
                throw AppError.broken("file", "is not a zip archive")
            }
        case .librarything:
            let first = data.prefix(4096).drop { [0x20, 0x0A, 0x0D, 0x09, 0xEF, 0xBB, 0xBF].contains($0) }.first
            guard first == UInt8(ascii: "{") || first == UInt8(ascii: "[") else { throw AppError.invalid("file", "is not JSON") }
        case .goodreads:
            try header(data)
        }
    }

    /// The CSV's header line read and checked; a header longer than any export's is refused.
    private static func header(_ data: Data) throws {
        let limit = 64 << 10
        let head = data.prefix(limit)
        guard let end = head.firstIndex(of: UInt8(ascii: "\n")) ?? (data.count <= limit ? data.endIndex : nil) else {
            throw AppError.broken("file", "is not a Goodreads export: its first line is longer than \(limit) bytes")
        }
        guard let text = String(data: data[data.startIndex..<end], encoding: .utf8) else { throw AppError.invalid("file", "is not UTF-8 text") }
        var first: CSVReader.Record?
        do {
            try CSVReader.read(text, maxField: limit) { record in if first == nil { first = record } }
        } catch let error as CSVReader.Malformed {
            throw AppError.broken("file", "line \(error.line): \(error.message)")
        }
        guard let first else { throw AppError.broken("file", "is empty") }
        _ = try GoodreadsImport.columns(first)
    }
}
