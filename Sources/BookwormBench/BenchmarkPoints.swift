import BookwormApp

/// Query points for the nearby benchmark, drawn like the seeded homes.
enum BenchmarkPoints {
    static func cityWeighted(count: Int) -> [(latitude: Double, longitude: Double)] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in
            let point = SeedCities.scatter(around: SeedCities.pick(using: &generator), using: &generator)
            return (point.latitude, point.longitude)
        }
    }
}
