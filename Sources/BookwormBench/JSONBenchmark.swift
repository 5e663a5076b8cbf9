import BookwormCore
import Catalog
import Foundation

/// `JSONWriter` exists only for speed: this measures it against `JSONEncoder.api` on the same
/// page (50 copies, as `GET /v1/copies?limit=50` returns), checks both give the same bytes, and
/// prints the two rates side by side.
struct JSONBenchmark {
    let rounds: Int

    func run() throws {
        let page = Page(data: (0..<50).map(Self.copy), nextCursor: "MTcwMDAwMDAwMDAwMDAwMDo5ZjYx")
        var writer = JSONWriter(capacity: 32_768)
        page.write(to: &writer)
        let encoded = [UInt8](try JSONEncoder.api.encode(page))
        guard writer.bytes == encoded else { throw Shell.Failure(description: "JSONWriter and JSONEncoder disagree on the page") }

        let encoder = try BenchTiming.secondsPerRound(rounds: rounds) { _ = try JSONEncoder.api.encode(page) }
        let written = try BenchTiming.secondsPerRound(rounds: rounds) {
            var writer = JSONWriter(capacity: 32_768)
            page.write(to: &writer)
            guard !writer.bytes.isEmpty else { throw Shell.Failure(description: "empty page") }
        }
        print("JSON page of 50 copies (\(encoded.count) bytes), \(rounds) rounds, median of 5 runs")
        print(String(format: "  JSONEncoder.api   %8.1f µs/page", encoder * 1e6))
        print(String(format: "  JSONWriter        %8.1f µs/page   (%.1f× faster)", written * 1e6, encoder / written))
        BenchResults.save("json", [
            ResultRow("JSONWriter, page of 50 copies", written * 1e6, "µs/page",
                      reference: String(format: "JSONEncoder %.1f µs/page", encoder * 1e6), ratio: written / encoder,
                      goal: "same bytes", met: true),
        ])
    }

    private static func copy(_ index: Int) -> CopyView {
        CopyView(id: UUID(), book: BookSummary(id: UUID(), isbn13: "9780306406157", title: "The Name of the Rose, vol. \(index)",
                                               authors: ["Umberto Eco", "William Weaver"]),
                 owner: OwnerSummary(id: UUID(), username: "reader_\(index)", displayName: index % 3 == 0 ? nil : "Zoë \"Z\" Ng"),
                 condition: "good", status: "available", notes: index % 2 == 0 ? nil : "Some pencil marks on p. 12 — otherwise clean",
                 pinID: UUID(), photoID: nil, createdAt: Date(timeIntervalSince1970: 1_700_000_000 + Double(index)),
                 updatedAt: Date(timeIntervalSince1970: 1_700_000_500), createdMicros: 1_700_000_000_000_000)
    }
}
