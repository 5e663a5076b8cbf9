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
        let cells = try median { _ = try write(page) }
        let decoded = try median { _ = try decodedThenWritten(rows, cursor) }
        return Figures(rows: rows.count, bytes: fromCells.count, cells: cells, decoded: decoded)

        func median(_ body: () throws -> Void) throws -> Double {
            var runs: [Double] = []
            for _ in 0..<5 {
                let start = ContinuousClock.now
                for _ in 0..<rounds { try body() }
                let elapsed = ContinuousClock.now - start
                runs.append((Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18) / Double(rounds))
            }
            return runs.sorted()[2]
        }
    }

    private static func write(_ page: Page<NearbyCopy>) throws -> [UInt8] {
        var writer = JSONWriter(capacity: 32_768)
        try page.write(to: &writer)
        return writer.bytes
    }

    /// The previous path: every row decoded into a `CopyView`, then written.
    private static func decodedThenWritten(_ rows: [NearbyCopy], _ nextCursor: String?) throws -> [UInt8] {
        let views = try rows.map { (try $0.copy.view(), $0) }
        var writer = JSONWriter(capacity: 32_768)
        writer.object { json in
            json.key("data")
            json.array(views) { (json: inout JSONWriter, item: (CopyView, NearbyCopy)) in
                item.0.write(to: &json, nearby: (Nearby.rounded(item.1.distanceKm), item.1.place))
            }
            json.key("next_cursor")
            json.string(nextCursor)
        }
        return writer.bytes
    }
}
