import Foundation
import PostgresNIO

/// Every row of one result, read while the connection was leased.
package struct Rows: AsyncSequence, Sendable {
    package typealias Element = PostgresRow
    package let rows: [PostgresRow]

    init(_ sequence: PostgresRowSequence) async throws {
        rows = try await sequence.collect()
    }

    package func makeAsyncIterator() -> Iterator { Iterator(base: rows.makeIterator()) }

    package struct Iterator: AsyncIteratorProtocol {
        var base: IndexingIterator<[PostgresRow]>
        package mutating func next() async throws -> PostgresRow? { base.next() }
    }

    package func decode<each Column: PostgresDecodable>(_ columnType: (repeat each Column).Type, file: String = #fileID, line: Int = #line)
        -> AsyncThrowingMapSequence<Rows, (repeat each Column)>
    {
        map { row in try row.decode(columnType, file: file, line: line) }
    }

    package func collect() -> [PostgresRow] { rows }
}

/// Rows decoded in a child task, handed to the caller once that task is done with them.
struct Transfer<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// A row's cells decoded once each, in column order, through PostgresNIO's row iterator, so a
/// statement that puts its own columns before or after a shared list (`CopiesStore.columns`)
/// reads them in turn, with no offsets to keep in step with the list. It also skips the array of
/// cells `PostgresRandomAccessRow` makes first: 1.7 % of a nearby page's server CPU (perf), too
/// little to show in a full benchmark run. One method per column type, not one generic: a
/// generic `next` called from another module was not specialised there and looked up the
/// type's metadata for every cell (a nearby page's server CPU up by a sixth).
package struct RowCells {
    private var cells: PostgresRow.Iterator

    package init(_ row: PostgresRow) {
        cells = row.makeIterator()
    }

    package mutating func next(_: UUID.Type, file: String = #fileID, line: Int = #line) throws -> UUID { try decode(file, line) }
    package mutating func next(_: UUID?.Type, file: String = #fileID, line: Int = #line) throws -> UUID? { try decode(file, line) }
    package mutating func next(_: String.Type, file: String = #fileID, line: Int = #line) throws -> String { try decode(file, line) }
    package mutating func next(_: String?.Type, file: String = #fileID, line: Int = #line) throws -> String? { try decode(file, line) }
    package mutating func next(_: [String].Type, file: String = #fileID, line: Int = #line) throws -> [String] { try decode(file, line) }
    package mutating func next(_: [String]?.Type, file: String = #fileID, line: Int = #line) throws -> [String]? { try decode(file, line) }
    package mutating func next(_: Date.Type, file: String = #fileID, line: Int = #line) throws -> Date { try decode(file, line) }
    package mutating func next(_: Int64.Type, file: String = #fileID, line: Int = #line) throws -> Int64 { try decode(file, line) }
    package mutating func next(_: Double.Type, file: String = #fileID, line: Int = #line) throws -> Double { try decode(file, line) }
    package mutating func next(_: Double?.Type, file: String = #fileID, line: Int = #line) throws -> Double? { try decode(file, line) }
    package mutating func next(_: Bool.Type, file: String = #fileID, line: Int = #line) throws -> Bool { try decode(file, line) }

    /// After a row's last read: a row with cells left was read from the wrong places (a column
    /// added to a shared list that a reader of it does not know of), which a cell of the same
    /// type would not show.
    package mutating func end(file: String = #fileID, line: Int = #line) throws {
        guard cells.next() == nil else { throw Misread(file: file, line: line, ended: false) }
    }

    private mutating func decode<T: PostgresDecodable>(_ file: String, _ line: Int) throws -> T {
        guard let cell = cells.next() else { throw Misread(file: file, line: line, ended: true) }
        return try cell.decode(T.self, file: file, line: line)
    }

    /// A statement returned fewer or more columns than the code reading it: a programming
    /// error, a 500.
    package struct Misread: Error, CustomStringConvertible {
        let file: String
        let line: Int
        /// The row ended before a read (else it had cells left at `end`).
        let ended: Bool

        package var description: String {
            ended ? "a row ended before the column read at \(file):\(line)" : "a row had columns left at \(file):\(line)"
        }
    }
}
