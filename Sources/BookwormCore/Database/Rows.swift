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
