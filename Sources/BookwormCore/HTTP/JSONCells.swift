import Foundation
import NIOCore
import PostgresNIO

/// A cell whose bytes are not what its writer expects (another type, text format, a short
/// value): the statement and the writer disagree, a fault of the code, not of the request.
package struct CellShapeError: Error, CustomStringConvertible {
    let column: Int
    let expected: String

    package var description: String { "column \(column) is not a binary \(expected)" }
}

/// JSON written straight from the cells of a row in PostgreSQL's binary format, for pages that
/// pass what they read through unchanged. Decoding a nearby page's rows into Swift values
/// (strings, arrays, a view per copy) and then writing those was a quarter of the server's CPU
/// for the page; the bytes are the same as `JSONWriter` writes for the decoded values, which
/// `JSONWriterTests` holds to, so clients and ETags cannot tell the two apart.
extension JSONWriter {
    /// A `text` cell as a JSON string (`prefix` first, which must need no escaping), or null.
    /// PostgreSQL sends text in the client encoding, UTF-8, so its bytes are copied as they are.
    package mutating func text(_ row: PostgresRandomAccessRow, _ column: Int, prefix: StaticString = "") throws {
        // `subscript(data:)`, not a `PostgresCell`: a cell copies its column's name, a retain
        // and a release per cell that were a tenth of writing a page.
        let cell = row[data: column]
        guard let bytes = cell.value else { return null() }
        guard Self.isText(cell.type) else { throw CellShapeError(column: column, expected: "text") }
        bytes.withUnsafeReadableBytes { quoted($0, prefix: prefix) }
    }

    /// A `uuid` cell, lowercase, or null.
    package mutating func uuid(_ row: PostgresRandomAccessRow, _ column: Int) throws {
        let cell = row[data: column]
        guard let bytes = cell.value else { return null() }
        guard cell.type == .uuid, bytes.readableBytes == 16 else { throw CellShapeError(column: column, expected: "uuid") }
        bytes.withUnsafeReadableBytes { uuid(bytes: $0) }
    }

    /// A `timestamptz` cell as `date` writes it (never null: every timestamp shown is NOT NULL).
    package mutating func date(_ row: PostgresRandomAccessRow, _ column: Int) throws {
        let cell = row[data: column]
        guard cell.type == .timestamptz, let bytes = cell.value, bytes.readableBytes == 8,
              let microseconds = bytes.getInteger(at: bytes.readerIndex, as: Int64.self)
        else { throw CellShapeError(column: column, expected: "timestamptz") }
        // The very `Date` PostgresNIO decodes, so the second written is the same to the last bit.
        date(Date(timeInterval: Double(microseconds) / 1_000_000, since: Self.postgresEpoch))
    }

    /// A one-dimensional `text[]` cell without nulls as a JSON array of strings.
    package mutating func textArray(_ row: PostgresRandomAccessRow, _ column: Int) throws {
        let cell = row[data: column]
        let shape = CellShapeError(column: column, expected: "one-dimensional text[] without nulls")
        guard var buffer = cell.value, cell.type == .textArray,
              let dimensions = buffer.readInteger(as: Int32.self), buffer.readInteger(as: Int32.self) != nil,
              let elementType = buffer.readInteger(as: UInt32.self), elementType == PostgresDataType.text.rawValue,
              dimensions == 0 || dimensions == 1
        else { throw shape }
        var count: Int32 = 0
        if dimensions == 1 {
            guard let length = buffer.readInteger(as: Int32.self), buffer.readInteger(as: Int32.self) != nil, length >= 0
            else { throw shape }
            count = length
        }
        separate()
        append(UInt8(ascii: "["))
        needsComma = false
        for _ in 0..<count {
            guard let length = buffer.readInteger(as: Int32.self), length >= 0, let element = buffer.readSlice(length: Int(length))
            else { throw shape }
            element.withUnsafeReadableBytes { quoted($0) }
        }
        append(UInt8(ascii: "]"))
        needsComma = true
    }

    private static let postgresEpoch = Date(timeIntervalSince1970: 946_684_800)

    private static func isText(_ type: PostgresDataType) -> Bool {
        type == .text || type == .varchar || type == .bpchar || type == .name
    }
}
