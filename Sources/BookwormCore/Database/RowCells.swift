import Foundation
import NIOCore
import PostgresNIO

/// Fixed-width cells read straight from their binary bytes, for the rows of the pages fetched
/// most (a nearby page reads five such cells in each of its 51 rows). `decode` goes through a
/// `PostgresCell`, which copies the column's name and runs the generic decoding machinery for
/// each cell: 3 % of the server's CPU for a nearby page. The values are bit for bit what
/// `decode` gives; a cell of another type or width is a `CellShapeError`, a fault of the code.
/// A cell whose bytes are not what its reader expects (another type, a short value): the
/// statement and the reader disagree, a fault of the code, not of the request.
package struct CellShapeError: Error, CustomStringConvertible {
    let column: Int
    let expected: String

    package var description: String { "column \(column) is not a binary \(expected)" }
}

extension PostgresRandomAccessRow {
    /// A `float8` cell, or nil for NULL.
    package func float8OrNil(_ column: Int) throws -> Double? {
        let cell = self[data: column]
        guard let bytes = cell.value else { return nil }
        guard cell.type == .float8, bytes.readableBytes == 8, let bits = bytes.getInteger(at: bytes.readerIndex, as: UInt64.self)
        else { throw CellShapeError(column: column, expected: "float8") }
        return Double(bitPattern: bits)
    }

    /// A `float8` cell that is never NULL.
    package func float8(_ column: Int) throws -> Double {
        guard let value = try float8OrNil(column) else { throw CellShapeError(column: column, expected: "float8, not null") }
        return value
    }

    /// A `bool` cell that is never NULL.
    package func bool(_ column: Int) throws -> Bool {
        let cell = self[data: column]
        guard cell.type == .bool, let bytes = cell.value, bytes.readableBytes == 1,
              let byte = bytes.getInteger(at: bytes.readerIndex, as: UInt8.self)
        else { throw CellShapeError(column: column, expected: "bool, not null") }
        return byte != 0
    }
}
