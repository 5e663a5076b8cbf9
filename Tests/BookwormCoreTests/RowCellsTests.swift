import Foundation
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// `RowCells`: a row's cells read in column order, one typed read per column.
@Suite struct RowCellsTests {
    @Test func cellsAreReadInColumnOrderWithTheirTypes() async throws {
        try await withTestDatabase(empty: true) { _, client in
            let id = UUID()
            let rows = try await client.query("""
                SELECT \(id), 'text', NULL::text, 2.5::float8, NULL::float8, true, ARRAY['a', 'b'], NULL::text[],
                       7::int8, timestamptz '2026-01-02 03:04:05Z', NULL::uuid
                """).collect()
            let row = try #require(rows.first)
            var cells = RowCells(row)
            #expect(try cells.next(UUID.self) == id)
            #expect(try cells.next(String.self) == "text")
            #expect(try cells.next(String?.self) == nil)
            #expect(try cells.next(Double.self) == 2.5)
            #expect(try cells.next(Double?.self) == nil)
            #expect(try cells.next(Bool.self))
            #expect(try cells.next([String].self) == ["a", "b"])
            #expect(try cells.next([String]?.self) == nil)
            #expect(try cells.next(Int64.self) == 7)
            #expect(try cells.next(Date.self) == Date(timeIntervalSince1970: 1_767_323_045))
            #expect(try cells.next(UUID?.self) == nil)
            try cells.end()
        }
    }

    @Test func readingPastTheLastColumnNamesTheReadNotACrash() async throws {
        try await withTestDatabase(empty: true) { _, client in
            let rows = try await client.query("SELECT 1::int8").collect()
            var cells = RowCells(try #require(rows.first))
            #expect(try cells.next(Int64.self) == 1)
            let misread = #expect(throws: RowCells.Misread.self) { try cells.next(String.self) }
            #expect(misread?.description.contains("ended before the column read at BookwormCoreTests/RowCellsTests.swift") == true)
        }
    }

    /// A column added to a shared list that one reader does not know of shifts its reads by one;
    /// cells of the same type would not show it, the cell left over does.
    @Test func aRowWithColumnsLeftAfterItsLastReadIsAMisread() async throws {
        try await withTestDatabase(empty: true) { _, client in
            let rows = try await client.query("SELECT 'condition', 'status', 'added later'").collect()
            var cells = RowCells(try #require(rows.first))
            #expect(try cells.next(String.self) == "condition")
            #expect(try cells.next(String.self) == "status")
            let misread = #expect(throws: RowCells.Misread.self) { try cells.end() }
            #expect(misread?.description.contains("columns left") == true)
        }
    }

    @Test func aCellOfAnotherTypeIsADecodingErrorNotAWrongValue() async throws {
        try await withTestDatabase(empty: true) { _, client in
            let rows = try await client.query("SELECT 'not a number'::text").collect()
            var cells = RowCells(try #require(rows.first))
            #expect(throws: PostgresDecodingError.self) { try cells.next(Double.self) }
        }
    }
}
