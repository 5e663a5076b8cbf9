import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Places
@testable import Catalog
@testable import Discovery
@testable import BookwormTestSupport

/// Pages written straight from PostgreSQL's cells (`CopyCells`, `JSONCells.swift`) must be byte
/// for byte what `JSONEncoder.api` writes for the decoded values. The cells come from a real
/// PostgreSQL, the values bound as parameters, so their bytes are exactly what it sends.
@Suite struct JSONCellsTests {
    @Test func nearbyPagesFromCellsAreByteForByteWhatJSONEncoderWrites() async throws {
        try await withTestDatabase(empty: true) { _, client in
            var random = SeededRandom(seed: 42)
            for round in 0..<60 {
                var items: [NearbyCopy] = []
                for _ in 0..<random.next(upTo: 6) {
                    let view = Self.storable(JSONWriterTests.copy(&random))
                    let cells = try await Self.cells(of: view, on: client)
                    #expect(try JSONEncoder.api.encode(cells.view()) == JSONEncoder.api.encode(view))
                    items.append(NearbyCopy(copy: cells, distanceKm: random.pick([0, 0.04, 3, 9.96, 12.5, 499.99, random.double(0, 500)]),
                                            sortKey: 0, place: PublicPlace(latitude: random.double(-90, 90), longitude: random.double(-180, 180))))
                }
                try JSONWriterTests().expectSameBytes(Page(data: items, nextCursor: round % 3 == 0 ? nil : random.pick(JSONWriterTests.awkward)))
            }
        }
    }

    @Test func datesFromCellsAtTheirEdges() async throws {
        try await withTestDatabase(empty: true) { _, client in
            var random = SeededRandom(seed: 3)
            // As in `JSONWriterTests`, to the microsecond PostgreSQL keeps: fractions either side
            // of a second, before 1970 and 2000 (PostgreSQL's epoch), and year 10000.
            let instants: [Double] = [0, 0.999999, 1.7, -0.5, -0.000001, -86_400.25, 946_684_799.999999, 946_684_800, 951_868_799.9,
                                      1_793_000_000.999999, -2_208_988_800, 253_402_300_799, 253_402_300_800]
            for instant in instants {
                let base = JSONWriterTests.copy(&random)
                let view = Self.storable(CopyView(id: base.id, book: base.book, owner: base.owner, condition: "good", status: "available",
                                                  createdAt: Date(timeIntervalSince1970: instant),
                                                  updatedAt: Date(timeIntervalSince1970: instant + 0.5), createdMicros: 0))
                let page = Page(data: [NearbyCopy(copy: try await Self.cells(of: view, on: client), distanceKm: 1, sortKey: 0,
                                                  place: PublicPlace(latitude: 0, longitude: 0))], nextCursor: nil)
                try JSONWriterTests().expectSameBytes(page)
            }
        }
    }

    @Test func aCellOfAnotherShapeIsAnErrorNotAGuess() async throws {
        try await withTestDatabase(empty: true) { _, client in
            let rows = try await client.query("""
                SELECT 7::int4, ARRAY[['a', 'b']]::text[], ARRAY['a', NULL]::text[], 'x'::text, now()::date, '{}'::text[]
                """, logger: Logger(label: "test")).collect()
            let row = try #require(rows.first).makeRandomAccess()
            var json = JSONWriter()
            #expect(throws: CellShapeError.self) { try json.uuid(row, 0) }
            #expect(throws: CellShapeError.self) { try json.text(row, 0) }
            #expect(throws: CellShapeError.self) { try json.textArray(row, 1) }
            #expect(throws: CellShapeError.self) { try json.textArray(row, 2) }
            #expect(throws: CellShapeError.self) { try json.uuid(row, 3) }
            #expect(throws: CellShapeError.self) { try json.date(row, 4) }
            json = JSONWriter()
            try json.textArray(row, 5)
            #expect(json.bytes == Array("[]".utf8))
        }
    }

    /// `RowCells.swift` reads float8 and bool cells as `decode` does, to the last bit, and a
    /// cell of another type, width or a NULL where none may be is an error.
    @Test func fixedWidthCellsReadAsDecodeReadsThem() async throws {
        try await withTestDatabase(empty: true) { _, client in
            let values: [Double] = [0, -0.0, 1.5, -123.456789012345, .pi, 1e-300, -1e300, .leastNonzeroMagnitude, .greatestFiniteMagnitude]
            for value in values {
                let rows = try await client.query("SELECT \(value)::float8, \(value < 0), NULL::float8", logger: Logger(label: "test")).collect()
                let row = try #require(rows.first).makeRandomAccess()
                #expect(try row.float8(0).bitPattern == row[0].decode(Double.self).bitPattern)
                #expect(try row.float8(0).bitPattern == value.bitPattern)
                #expect(try row.bool(1) == (value < 0))
                #expect(try row.float8OrNil(2) == nil)
                #expect(throws: CellShapeError.self) { try row.float8(2) }
            }
            let rows = try await client.query("SELECT 7::int4, 7::float4, 'x'::text, NULL::bool, 1::int8", logger: Logger(label: "test")).collect()
            let row = try #require(rows.first).makeRandomAccess()
            #expect(throws: CellShapeError.self) { try row.float8(0) }
            #expect(throws: CellShapeError.self) { try row.float8(1) }
            #expect(throws: CellShapeError.self) { try row.float8OrNil(2) }
            #expect(throws: CellShapeError.self) { try row.bool(3) }
            #expect(throws: CellShapeError.self) { try row.bool(4) }
        }
    }

    /// `view`'s columns as `CopiesStore.columns` gives them, each bound as a parameter.
    static func cells(of view: CopyView, on client: PostgresClient) async throws -> CopyCells {
        let query: PostgresQuery = """
            SELECT \(view.id), \(view.condition), \(view.status), \(view.notes), \(view.pinID), \(view.photoID),
                   \(view.createdAt), \(view.updatedAt), \(view.createdMicros), \(view.book.id), \(view.book.isbn13),
                   \(view.book.title), \(view.book.authors), \(view.owner.id), \(view.owner.username), \(view.owner.displayName)
            """
        let rows = try await client.query(query, logger: Logger(label: "test")).collect()
        return CopyCells(try #require(rows.first).makeRandomAccess(), from: 0)
    }

    /// The same copy with what PostgreSQL cannot store or keep taken out: NUL characters, and
    /// time finer than a microsecond.
    static func storable(_ view: CopyView) -> CopyView {
        func text(_ value: String) -> String { value.replacingOccurrences(of: "\u{0}", with: "") }
        func micros(_ date: Date) -> Date { Date(timeIntervalSince1970: (date.timeIntervalSince1970 * 1e6).rounded(.down) / 1e6) }
        let book = BookSummary(id: view.book.id, isbn13: view.book.isbn13, title: text(view.book.title), authors: view.book.authors.map(text))
        let owner = OwnerSummary(id: view.owner.id, username: text(view.owner.username), displayName: view.owner.displayName.map(text))
        return CopyView(id: view.id, book: book, owner: owner, condition: view.condition, status: view.status, notes: view.notes.map(text),
                        pinID: view.pinID, photoID: view.photoID, createdAt: micros(view.createdAt), updatedAt: micros(view.updatedAt),
                        createdMicros: view.createdMicros)
    }
}
