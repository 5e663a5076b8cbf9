import Foundation
import Logging
import Places
import PostgresNIO

/// Where demo users live: a few dozen cities, weighted roughly by size, several of them beside
/// the antimeridian and some far north or south, so nearby search meets its edge cases.
package enum SeedCities {
    static let all: [(name: String, point: GeoPoint, weight: Int)] = [
        ("Berlin", GeoPoint(latitude: 52.52, longitude: 13.405), 8), ("Paris", GeoPoint(latitude: 48.857, longitude: 2.352), 9),
        ("London", GeoPoint(latitude: 51.507, longitude: -0.128), 10), ("Madrid", GeoPoint(latitude: 40.417, longitude: -3.704), 6),
        ("Lisbon", GeoPoint(latitude: 38.722, longitude: -9.139), 4), ("Rome", GeoPoint(latitude: 41.903, longitude: 12.496), 5),
        ("Warsaw", GeoPoint(latitude: 52.23, longitude: 21.012), 4), ("Stockholm", GeoPoint(latitude: 59.329, longitude: 18.069), 3),
        ("Reykjavík", GeoPoint(latitude: 64.147, longitude: -21.943), 1), ("Tromsø", GeoPoint(latitude: 69.649, longitude: 18.956), 1),
        ("New York", GeoPoint(latitude: 40.713, longitude: -74.006), 10), ("Mexico City", GeoPoint(latitude: 19.433, longitude: -99.133), 7),
        ("São Paulo", GeoPoint(latitude: -23.551, longitude: -46.633), 8), ("Buenos Aires", GeoPoint(latitude: -34.604, longitude: -58.382), 6),
        ("Ushuaia", GeoPoint(latitude: -54.801, longitude: -68.303), 1), ("Anchorage", GeoPoint(latitude: 61.218, longitude: -149.9), 1),
        ("Lagos", GeoPoint(latitude: 6.524, longitude: 3.379), 6), ("Nairobi", GeoPoint(latitude: -1.292, longitude: 36.822), 4),
        ("Cairo", GeoPoint(latitude: 30.044, longitude: 31.236), 6), ("Mumbai", GeoPoint(latitude: 19.076, longitude: 72.878), 9),
        ("Delhi", GeoPoint(latitude: 28.704, longitude: 77.102), 9), ("Tokyo", GeoPoint(latitude: 35.676, longitude: 139.65), 10),
        ("Seoul", GeoPoint(latitude: 37.567, longitude: 126.978), 7), ("Beijing", GeoPoint(latitude: 39.904, longitude: 116.407), 8),
        ("Sydney", GeoPoint(latitude: -33.869, longitude: 151.209), 5), ("Auckland", GeoPoint(latitude: -36.849, longitude: 174.763), 3),
        ("Suva", GeoPoint(latitude: -18.124, longitude: 178.45), 1), ("Taveuni", GeoPoint(latitude: -16.85, longitude: -179.95), 1),
        ("Nukuʻalofa", GeoPoint(latitude: -21.139, longitude: -175.204), 1), ("Apia", GeoPoint(latitude: -13.834, longitude: -171.76), 1),
        ("Petropavlovsk", GeoPoint(latitude: 53.024, longitude: 158.643), 1), ("Anadyr", GeoPoint(latitude: 64.734, longitude: 177.514), 1),
    ]

    package static func pick<G: RandomNumberGenerator>(using generator: inout G) -> GeoPoint {
        let total = all.reduce(0) { $0 + $1.weight }
        var roll = Int.random(in: 0..<total, using: &generator)
        for city in all {
            if roll < city.weight { return city.point }
            roll -= city.weight
        }
        return all[0].point
    }

    /// A point around `centre`, denser near the middle (most within ~8 km), wrapped at ±180°.
    package static func scatter<G: RandomNumberGenerator>(around centre: GeoPoint, using generator: inout G) -> GeoPoint {
        let distance = pow(Double.random(in: 0..<1, using: &generator), 1.5) * 12 / Geo.earthRadiusKm * 180 / .pi
        let bearing = Double.random(in: 0..<(2 * .pi), using: &generator)
        let latitude = min(89.999, max(-89.999, centre.latitude + distance * cos(bearing)))
        var longitude = centre.longitude + distance * sin(bearing) / max(0.01, cos(latitude * .pi / 180))
        if longitude > 180 { longitude -= 360 } else if longitude < -180 { longitude += 360 }
        return GeoPoint(latitude: latitude, longitude: longitude)
    }
}

extension Seeder {
    /// Gives every user without pins a home in a city (their default) and, for about half of
    /// them, a meetup place in the same city.
    func addPins(batch: Int = 5000) async throws -> Int {
        var userIDs: [UUID] = []
        let rows = try await client.query("SELECT id FROM users u WHERE NOT EXISTS (SELECT 1 FROM pins p WHERE p.owner_id = u.id)", logger: logger)
        for try await id in rows.decode(UUID.self) { userIDs.append(id) }
        var generator = SystemRandomNumberGenerator()
        let progress = ProgressBar(label: "pins", total: userIDs.count)
        var created = 0
        for start in stride(from: 0, to: userIDs.count, by: batch) {
            var owners: [UUID] = [], kinds: [String] = [], lats: [Double] = [], lons: [Double] = []
            var publicLats: [Double] = [], publicLons: [Double] = [], defaults: [Bool] = []
            for owner in userIDs[start..<min(userIDs.count, start + batch)] {
                let city = SeedCities.pick(using: &generator)
                let home = SeedCities.scatter(around: city, using: &generator)
                let homePublic = PinKind.home.publicPoint(for: home)
                owners.append(owner); kinds.append("home"); lats.append(home.latitude); lons.append(home.longitude)
                publicLats.append(homePublic.latitude); publicLons.append(homePublic.longitude); defaults.append(true)
                if Bool.random(using: &generator) {
                    let meetup = SeedCities.scatter(around: city, using: &generator)
                    owners.append(owner); kinds.append("meetup"); lats.append(meetup.latitude); lons.append(meetup.longitude)
                    publicLats.append(meetup.latitude); publicLons.append(meetup.longitude); defaults.append(false)
                }
            }
            try await client.query("""
                INSERT INTO pins (owner_id, label, kind, latitude, longitude, public_latitude, public_longitude, is_default)
                SELECT owner, CASE kind WHEN 'home' THEN 'Home' ELSE 'Meetup spot' END, kind, lat, lon, plat, plon, is_default
                FROM unnest(\(owners)::uuid[], \(kinds)::text[], \(lats)::float8[], \(lons)::float8[],
                            \(publicLats)::float8[], \(publicLons)::float8[], \(defaults)::bool[])
                     AS t(owner, kind, lat, lon, plat, plon, is_default)
                """, logger: logger)
            created += owners.count
            progress.advance(to: min(userIDs.count, start + batch))
        }
        // A third of copies sit on their owner's meetup place; the rest use the default pin.
        try await client.query("""
            UPDATE copies c SET pin_id = p.id FROM pins p
            WHERE p.owner_id = c.owner_id AND p.kind = 'meetup' AND c.pin_id IS NULL AND random() < 0.33
            """, logger: logger)
        // As autovacuum would in a live service: statistics, and a visibility map for index-only scans.
        try await client.query("VACUUM (ANALYZE) pins", logger: logger)
        try await client.query("VACUUM (ANALYZE) copies", logger: logger)
        return created
    }
}
