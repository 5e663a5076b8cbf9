import Discovery
import Foundation
import Places
import PostgresNIO

/// The nearby feed at a wide radius, where a page reads up to 400 one-degree regions: before
/// they were allowed past 24, radii over about 200 km read every pin in the radius and then
/// their posts, the statement kept as this series' reference (slow, so only at a few points).
struct FeedWideRadius {
    static let radiusKm = 400.0
    /// Points whose page is also run by pins, for the time and the same ids.
    static let referencePoints = 10

    var pgbench: [Double] = []
    var project: [Double] = []
    var byPins: [Double] = []
    var mismatches = 0

    /// The project's page and the by-pins statement, alternating, on one connection.
    mutating func compare(_ origins: [GeoPoint], store: PostsStore, limit: Int, on connection: PostgresConnection) async throws {
        for origin in origins.prefix(Self.referencePoints) {
            let (time, ids) = try await FeedBenchmark.timedPage(store, origin, radiusKm: Self.radiusKm, limit: limit, on: connection)
            let statement = FeedBenchmarkSQL.nearbyFeed(latitude: origin.latitude, longitude: origin.longitude,
                                                        radiusKm: Self.radiusKm, limit: limit).byPins
            let (pinsTime, pinsIDs) = try await FeedBenchmark.timedIDs(connection, statement)
            project.append(time)
            byPins.append(pinsTime)
            if ids != pinsIDs { mismatches += 1 }
        }
    }

    func tableRow() -> [String] {
        let pg = Percentiles(pgbench), project = Percentiles(project), pins = Percentiles(byPins)
        return ["    the same 100 points at \(Int(Self.radiusKm)) km (1° regions), pgbench", ms(pg.p50), ms(pg.p99),
                String(format: "by pins %.1f ms p50 (%.0f x) at %d points, same ids at %d", pins.p50, pins.p50 / max(project.p50, 0.001),
                       byPins.count, byPins.count - mismatches),
                mismatches == 0 ? "same ids" : "NO"]
    }

    func results() -> [ResultRow] {
        let pg = Percentiles(pgbench), project = Percentiles(project), pins = Percentiles(byPins)
        return [
            ResultRow("nearby feed p50 at \(Int(Self.radiusKm)) km (SQL, pgbench)", pg.p50, "ms"),
            ResultRow("nearby feed p99 at \(Int(Self.radiusKm)) km (SQL, pgbench)", pg.p99, "ms"),
            ResultRow("nearby feed p50 at \(Int(Self.radiusKm)) km from Swift, \(byPins.count) points", project.p50, "ms",
                      reference: String(format: "by pins %.2f ms", pins.p50), ratio: project.p50 / max(pins.p50, 0.001)),
            ResultRow("nearby feed at \(Int(Self.radiusKm)) km: points whose ids differ from by pins", Double(mismatches), "points",
                      goal: "0", met: mismatches == 0),
        ]
    }

    private func ms(_ value: Double) -> String { String(format: "%.2f ms", value) }
}
