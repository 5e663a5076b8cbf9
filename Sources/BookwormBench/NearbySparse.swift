import Discovery
import Foundation
import Places
import PostgresNIO

/// Where pins are sparse: the benchmark's city points moved half a degree north (about 55 km),
/// where a 10 km radius holds few pins or none. There the project's scan reads its cap of
/// pins (`NearbyStore.firstPinLimit`) and keeps those in the radius, while PostGIS's
/// `ST_DWithin` reads only the pins inside it: the case the project's design gives up.
struct SparseNearby {
    var project: [Double] = []
    var postGIS: [Double] = []
    var mismatches = 0
    var nonEmpty = 0

    static let shift = 0.5

    /// Alternating as the headline does: the reference, then the project warmed once and timed.
    static func measure(client: PostgresClient, origins: [(latitude: Double, longitude: Double)], radiusKm: Double, limit: Int,
                        caller: UUID) async throws -> SparseNearby {
        try await client.withConnection { connection in
            var sparse = SparseNearby()
            for origin in origins {
                let moved = GeoPoint(latitude: min(89, origin.latitude + shift), longitude: origin.longitude)
                let reference = NearbyReferences.literalPostGIS(latitude: moved.latitude, longitude: moved.longitude, radiusKm: radiusKm,
                                                                limit: limit, caller: caller)
                let (elapsed, rows) = try await NearbyReferences.timePrepared(reference, on: connection)
                let query = NearbyQuery(origin: moved, radiusKm: radiusKm, callerID: caller)
                _ = try await NearbyReferences.timeProject(query, limit: limit, runs: 1, on: connection)
                let (projectElapsed, ids, _) = try await NearbyReferences.timeProject(query, limit: limit, on: connection)
                sparse.postGIS.append(elapsed)
                sparse.project.append(projectElapsed)
                if try ids != rows.map({ try PostgresRandomAccessRow($0)[0].decode(UUID.self) }) { sparse.mismatches += 1 }
                if !ids.isEmpty { sparse.nonEmpty += 1 }
            }
            return sparse
        }
    }

    func print() {
        let project = Percentiles(project), postGIS = Percentiles(postGIS)
        Swift.print(String(format: "sparse points (%d city points moved 55 km north; %d with results, ids differ at %d): "
                           + "project %.2f / %.2f ms, PostGIS %.2f / %.2f ms (p50 / p99), %.2f x / %.2f x",
                           self.project.count, nonEmpty, mismatches, project.p50, project.p99, postGIS.p50, postGIS.p99,
                           project.p50 / max(postGIS.p50, 0.0001), project.p99 / max(postGIS.p99, 0.0001)))
    }

    var rows: [ResultRow] {
        let project = Percentiles(project), postGIS = Percentiles(postGIS)
        return [
            ResultRow("nearby copies p50, sparse points (moved 55 km from cities)", project.p50, "ms",
                      reference: String(format: "PostGIS best practice %.2f ms", postGIS.p50), ratio: project.p50 / max(postGIS.p50, 0.0001)),
            ResultRow("nearby copies p99, sparse points", project.p99, "ms",
                      reference: String(format: "PostGIS best practice %.2f ms", postGIS.p99), ratio: project.p99 / max(postGIS.p99, 0.0001)),
        ]
    }
}
