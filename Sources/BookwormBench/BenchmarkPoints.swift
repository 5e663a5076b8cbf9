import BookwormApp

/// Query points for the benchmarks, drawn like the seeded homes. The same points every run (a
/// fixed seed), so that two runs, or the code before and after a change, are timed at the very
/// same places: a p99 over 100 points is the slowest point's time, and fresh points each run
/// moved it by a fifth.
enum BenchmarkPoints {
    static func cityWeighted(count: Int) -> [(latitude: Double, longitude: Double)] {
        var generator = SplitMix64(seed: 19)
        return (0..<count).map { _ in
            let point = SeedCities.scatter(around: SeedCities.pick(using: &generator), using: &generator)
            return (point.latitude, point.longitude)
        }
    }
}

/// A small seeded generator (SplitMix64): reproducible, and plenty for picking query points.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
