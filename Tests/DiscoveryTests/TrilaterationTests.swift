import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing
@testable import BookwormCore
@testable import Places
@testable import BookwormTestSupport

/// An observer who queries nearby lists and the map from many places must learn nothing about where inside its ~1 km
/// cell a home pin really is: every answer stays byte-identical while the home moves.
@Suite struct TrilaterationTests {
    @Test func movingAHomeInsideItsCellChangesNothingAnyoneElseSees() async throws {
        try await withApp { app in
            let target = try await app.register()
            let observer = try await app.register()
            let start = GeoPoint(latitude: 52.5213377, longitude: 13.4113377)
            let centre = Geo.cellCentre(of: start)
            let pin = try await app.addPin(target.token, latitude: start.latitude, longitude: start.longitude)
            let pinID = try #require(pin["id"] as? String)
            try await app.addCopy(target.token, title: "Hidden Home")

            var generator = SystemRandomNumberGenerator()
            let origins = (0..<120).map { _ in
                GeoPoint(latitude: centre.latitude + .random(in: -0.2...0.2, using: &generator),
                         longitude: centre.longitude + .random(in: -0.3...0.3, using: &generator))
            }
            let moves = (0..<8).compactMap { _ -> GeoPoint? in
                let moved = GeoPoint(latitude: centre.latitude + .random(in: -0.004...0.004, using: &generator),
                                     longitude: centre.longitude + .random(in: -0.006...0.006, using: &generator))
                return Geo.cellCentre(of: moved) == centre ? moved : nil
            }
            #expect(moves.count >= 4)

            var baseline: [String]?
            for (index, move) in ([start] + moves).enumerated() {
                if index > 0 {
                    let patch = try await app.request(.patch, "/v1/me/pins/\(pinID)",
                                                      json: ["latitude": move.latitude, "longitude": move.longitude], token: target.token)
                    #expect(patch.status == .ok)
                }
                var seen: [String] = []
                for origin in origins {
                    for endpoint in ["copies", "owners"] {
                        for radius in [1.5, 7.0] {
                            let path = "/v1/nearby/\(endpoint)?latitude=\(origin.latitude)&longitude=\(origin.longitude)&radius_km=\(radius)"
                            let body = String(buffer: try await app.request(.get, path, token: observer.token).body)
                            #expect(!body.contains(String(move.latitude)) && !body.contains(String(move.longitude)))
                            seen.append(body)
                        }
                    }
                }
                for origin in origins.prefix(30) {
                    let bbox = "\(origin.longitude - 0.05),\(origin.latitude - 0.05),\(origin.longitude + 0.05),\(origin.latitude + 0.05)"
                    let body = String(buffer: try await app.request(.get, "/v1/map/pins?bbox=\(bbox)&zoom=14", token: observer.token).body)
                    #expect(!body.contains(String(move.latitude)) && !body.contains(String(move.longitude)))
                    seen.append(body)
                }
                if let baseline {
                    #expect(seen == baseline, "answers changed after move \(index)")
                } else {
                    baseline = seen
                    #expect(seen.contains { $0.contains("Hidden Home") })
                }
            }
        }
    }
}
