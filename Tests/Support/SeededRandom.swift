/// A small deterministic generator (SplitMix64), so a failure can be replayed.
struct SeededRandom {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func nextBits() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func next(upTo bound: Int) -> Int { Int(nextBits() % UInt64(bound)) }
    mutating func bool() -> Bool { nextBits() & 1 == 0 }
    mutating func double(_ low: Double, _ high: Double) -> Double { low + (high - low) * Double(nextBits() >> 11) / Double(1 << 53) }
    mutating func double(in range: ClosedRange<Double>) -> Double { double(range.lowerBound, range.upperBound) }
    mutating func pick<T>(_ items: [T]) -> T { items[next(upTo: items.count)] }
}
