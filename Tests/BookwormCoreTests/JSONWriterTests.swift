import Foundation
import Testing
@testable import BookwormCore
@testable import Places
@testable import Catalog
@testable import Discovery
@testable import BookwormTestSupport

/// `JSONWriter` must write exactly what `JSONEncoder.api` writes for every `JSONWritable`
/// type, so clients and ETags cannot tell which one produced a page.
@Suite struct JSONWriterTests {
    /// Quotes, backslashes, every control character, DEL, slashes, U+2028, emoji, combining marks.
    static let awkward: [String] = [
        "", "plain", "a\"b\\c/d", "</script>", "tab\there\nnew\rline\u{8}\u{c}",
        String((0..<32).map { Character(Unicode.Scalar(UInt8($0))) }), "\u{7f}\u{1b}[31m",
        "Straße — ½ 😀 e\u{301} \u{2028}\u{2029} \u{feff}", "中文书名", "'single' & <b>",
    ]

    @Test func copyPagesAndSingleCopiesAreByteForByteWhatJSONEncoderWrites() throws {
        var random = SeededRandom(seed: 7)
        for _ in 0..<200 {
            let copy = Self.copy(&random)
            try expectSameBytes(copy)
            try expectSameBytes(Page(data: [copy, Self.copy(&random)], nextCursor: "abc"))
        }
        try expectSameBytes(Page<CopyView>(data: [], nextCursor: nil))
    }

    /// A nearby page: each copy with its distance and its pin's public point in their sorted places.
    @Test func nearbyPagesAreByteForByteWhatJSONEncoderWrites() throws {
        var random = SeededRandom(seed: 11)
        let distances = [0, 0.04, 0.05, 0.15, 9.95, 499.99, 1e-7, 123.456]
        let latitudes = [-89.99, 0, 51.5072, 89.5], longitudes = [-179.99, 0, -0.1276, 180]
        for round in 0..<40 {
            let copies = (0..<random.next(upTo: 4)).map { index in
                NearbyCopy(copy: Self.copy(&random), distanceKm: distances[(round + index) % distances.count], sortKey: 0,
                           place: PublicPlace(latitude: latitudes[index % 4], longitude: longitudes[round % 4]))
            }
            try expectSameBytes(Page(data: copies, nextCursor: round % 2 == 0 ? nil : "next"))
            if let first = copies.first { try expectSameBytes(first) }
        }
    }

    @Test func feedPagesAreByteForByteWhatJSONEncoderWrites() throws {
        var random = SeededRandom(seed: 11)
        for round in 0..<200 {
            let posts = (0..<random.next(upTo: 5)).map { _ in
                let copy = Self.copy(&random)
                return PostView(id: UUID(), kind: random.pick(["offer", "wanted"]), body: random.pick(Self.awkward), author: copy.owner,
                                book: random.bool() ? nil : copy.book, copyID: random.bool() ? nil : copy.id, createdAt: copy.createdAt,
                                distanceKm: random.bool() ? nil : random.double(0, 500), createdMicros: 0)
            }
            try expectSameBytes(Page(data: posts, nextCursor: round % 2 == 0 ? nil : "next"))
            if let first = posts.first { try expectSameBytes(first) }
        }
    }

    @Test func numbersAndDatesAtTheirEdges() throws {
        let numbers: [Double] = [0, -0.0, 1, -1, 0.1, 1.5, 100, 1e15, 1e16, 1e17, 1.2345678901234568e20, 1e-7, 2.5e-320,
                                 48.857000024825076, -179.99999999999997, 90, -90, 6371.0088]
        var random = SeededRandom(seed: 3)
        for number in numbers {
            var writer = JSONWriter()
            PublicPlace(latitude: number, longitude: -number).writePin(to: &writer)
            let encoded = String(decoding: try JSONEncoder.api.encode(["pin": PublicPlace(latitude: number, longitude: -number)]), as: UTF8.self)
            #expect("{" + String(decoding: writer.bytes, as: UTF8.self) + "}" == encoded)
        }
        // Whole seconds, fractions either side, leap days, the turn of centuries, before 1970,
        // and the first instant of year 10000 (five digits: the writer's longer path).
        let instants: [Double] = [0, 0.999, 1.7, -0.5, -1.3, -86_400.25, 951_782_400, 951_868_799.9, 4_107_542_400, 1_793_000_000.999999,
                                  -2_208_988_800, 253_402_300_799, 253_402_300_800]
        for instant in instants {
            let base = Self.copy(&random)
            let copy = CopyView(id: base.id, book: base.book, owner: base.owner, condition: "good", status: "available", notes: nil,
                                pinID: nil, photoID: nil, createdAt: Date(timeIntervalSince1970: instant),
                                updatedAt: Date(timeIntervalSince1970: instant + 0.5), createdMicros: 0)
            try expectSameBytes(copy)
        }
    }

    /// A number written again is copied from where it was first written: across the writer's
    /// growth, interleaved with others, and never mistaken for another with the same digits.
    @Test func repeatedNumbersAreWrittenAsWhenFirstFormatted() throws {
        let pool: [Double] = [0, -0.0, 1, 0.1, 1e16, 2.5e-320, 51.5000121094598, -0.11917909500155126, 0.30000000000000004, 0.3]
        var random = SeededRandom(seed: 5)
        let numbers = (0..<3_000).map { _ in random.pick(pool) }
        var writer = JSONWriter(capacity: 64)
        writer.array(numbers) { $0.number($1) }
        #expect(String(decoding: writer.bytes, as: UTF8.self) == String(decoding: try JSONEncoder.api.encode(numbers), as: UTF8.self))
    }

    func expectSameBytes<T: Encodable & JSONWritable>(_ value: T) throws {
        var writer = JSONWriter()
        value.write(to: &writer)
        let expected = String(decoding: try JSONEncoder.api.encode(value), as: UTF8.self)
        #expect(String(decoding: writer.bytes, as: UTF8.self) == expected)
    }

    static func copy(_ random: inout SeededRandom) -> CopyView {
        let book = BookSummary(id: UUID(), isbn13: random.bool() ? "9780306406157" : nil, title: random.pick(awkward + ["Dune"]),
                               authors: (0..<random.next(upTo: 3)).map { _ in random.pick(awkward) })
        let owner = OwnerSummary(id: UUID(), username: random.pick(awkward), displayName: random.bool() ? nil : random.pick(awkward))
        let photoID = random.bool() ? nil : "p/\(random.next(upTo: 1000))"
        // A photo with its sizes, or an upload not made anew yet (photo_url alone); a blurhash's
        // alphabet has JSON's punctuation in it (never a quote or a backslash).
        let blurhash = random.pick(["LEHV6nWB2yk8pyo0adR*.7kCMdnj", #"L~}[|]^_{@?;=:.-,+*%$#"#])
        let photo = random.bool() ? nil : PhotoInfo(id: photoID, column: "\(random.next(upTo: 1600) + 1) \(random.next(upTo: 1600) + 1) \(blurhash)")
        return CopyView(id: UUID(), book: book, owner: owner, condition: "like_new", status: "available",
                        notes: random.bool() ? nil : random.pick(awkward), pinID: random.bool() ? nil : UUID(),
                        photoID: photoID, photo: photo,
                        createdAt: Date(timeIntervalSince1970: random.double(0, 4_102_444_800)),
                        updatedAt: Date(timeIntervalSince1970: random.double(1_600_000_000, 1_900_000_000)), createdMicros: 0)
    }
}
