import BookwormCore
import Catalog
import Discovery
import Foundation
import Logging
import Places

/// How the server turns a nearby page's rows into JSON: written from the cells as PostgreSQL
/// sent them (`CopyCells`, what the server does) against decoding each copy into a `CopyView`
/// and writing that (what it did before), on the same rows of a real page, one thread, no I/O.
/// Both must give the same bytes.
enum NearbyRowsJSON {
    struct Figures {
        let rows: Int
        let bytes: Int
        /// Seconds per page, the median of five timed runs.
        let cells: Double
        let decoded: Double

        func print() {
            Swift.print(String(format: "rows to JSON, a central London page (%d copies, %d bytes), one thread: from cells %.1f µs, "
                               + "decoded then written %.1f µs (%.2f x), the same bytes", rows, bytes, cells * 1e6, decoded * 1e6,
                               cells / decoded))
        }

        var results: [ResultRow] {
            [ResultRow("nearby page of \(rows) rows to JSON, from cells", cells * 1e6, "µs/page",
                       reference: String(format: "decoded then written %.1f µs/page", decoded * 1e6), ratio: cells / decoded)]
        }
    }

    /// Central London, 10 km, a page of 50, as the benchmark's viewer.
    static let origin = (latitude: 51.5074, longitude: -0.1278)

    static func measure(database: Database, latitude: Double, longitude: Double, caller: UUID, rounds: Int) async throws -> Figures {
        let store = NearbyStore(client: database, logger: Logger(label: "bench"))
        let query = NearbyQuery(origin: GeoPoint(latitude: latitude, longitude: longitude), radiusKm: 10, callerID: caller)
        let rows = try await store.copies(query, after: nil, limit: 50)
        let cursor = "MTcwMDAwMDAwMDAwMDAwMDo5ZjYx"
        let page = Page(data: rows, nextCursor: cursor)
        let fromCells = try write(page)
        guard fromCells == (try decodedThenWritten(rows, cursor)) else {
            throw Shell.Failure(description: "the nearby page written from cells and from decoded copies differ")
        }
        let cells = try BenchTiming.secondsPerRound(rounds: rounds) { _ = try write(page) }
        let decoded = try BenchTiming.secondsPerRound(rounds: rounds) { _ = try decodedThenWritten(rows, cursor) }
        return Figures(rows: rows.count, bytes: fromCells.count, cells: cells, decoded: decoded)
    }

    private static func write<Item: JSONWritable>(_ page: Page<Item>) throws -> [UInt8] {
        var writer = JSONWriter(capacity: 32_768)
        try page.write(to: &writer)
        return writer.bytes
    }

    /// The previous path: every row decoded into a `CopyView`, then written.
    private static func decodedThenWritten(_ rows: [NearbyCopy], _ nextCursor: String?) throws -> [UInt8] {
        try write(Page(data: try rows.map { DecodedCopy(view: try $0.copy.view(), row: $0) }, nextCursor: nextCursor))
    }

    /// A nearby copy decoded; its `Encodable` form is the row's (`Page` asks for one).
    private struct DecodedCopy: Encodable, JSONWritable {
        let view: CopyView
        let row: NearbyCopy

        func encode(to encoder: any Encoder) throws { try row.encode(to: encoder) }

        func write(to json: inout JSONWriter) {
            view.write(to: &json, nearby: (Nearby.rounded(row.distanceKm), row.place))
        }
    }
}
