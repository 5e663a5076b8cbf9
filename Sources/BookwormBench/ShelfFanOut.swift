import BookwormCore
import Foundation
import PostgresNIO

struct FanOutResult {
    var wishes = 0
    var expected = 0
    var alerts = 0
    var seconds = 0.0
    var postMillis = 0.0
    var idle = Percentiles([])
    var during = Percentiles([])
    var duringCount = 0

    var rowsPerSecond: Double { Double(alerts) / max(seconds, 0.001) }
}

extension ShelfBenchmark {
    /// The owner lists a copy of the popular book through the API; the server's own worker fans
    /// it out. The alerts table is polled every 10 ms for the copy's rows, while the owner keeps
    /// reading their copies from another connection.
    func fanOut(tools: LoadTools, base: String, database: BenchDatabase, client: PostgresClient) async throws -> FanOutResult {
        try database.execute(ShelfBenchmarkSQL.seedPopular(title: Self.popular, count: wishers, latitude: Self.london.latitude,
                                                           longitude: Self.london.longitude))
        let token = try BenchAccount.token(curl: tools.curl, base: base, username: Self.fanOwner)
        let connection = try BenchHTTPConnection(port: port)
        if try database.scalar("SELECT count(*) FROM pins p JOIN users u ON u.id = p.owner_id WHERE u.username = '\(Self.fanOwner)'") == 0 {
            _ = try connection.send("POST", "/v1/me/pins", token: token,
                                    json: "{\"label\":\"Shop\",\"kind\":\"meetup\",\"latitude\":51.51,\"longitude\":-0.12}")
        }
        let book = try database.lines("SELECT id FROM books WHERE title = '\(Self.popular)'").first ?? ""
        var result = FanOutResult()
        result.wishes = try database.scalar("SELECT count(*) FROM wishes WHERE book_id = '\(book)'")
        result.expected = try database.scalar("""
            SELECT count(*) FROM wishes w
            JOIN pins wp ON wp.owner_id = w.user_id AND wp.is_default
            JOIN pins op ON op.is_default AND op.owner_id = (SELECT id FROM users WHERE username = '\(Self.fanOwner)')
            WHERE w.book_id = '\(book)' AND w.user_id <> op.owner_id
              AND bookworm_distance_km(op.public_latitude, op.public_longitude, wp.public_latitude, wp.public_longitude) <= w.radius_km
            """)
        let port = self.port
        let idle = Samples()
        let idleUntil = ContinuousClock.now + .seconds(3)
        onThreads(1) { _ in probe(port: port, "/v1/me/copies?limit=20", token: token, into: idle) { ContinuousClock.now < idleUntil } }

        let begun = ContinuousClock.now
        let posted = try connection.send("POST", "/v1/me/copies", token: token, json: "{\"book_id\":\"\(book)\",\"condition\":\"good\"}")
        result.postMillis = (ContinuousClock.now - begun).milliseconds
        guard posted.status == 201, let object = try JSONSerialization.jsonObject(with: Data(posted.body.utf8)) as? [String: Any],
              let copy = (object["id"] as? String).flatMap(UUID.init(uuidString:)) else {
            throw Shell.Failure(description: "copy not created: \(posted.status) \(posted.body)")
        }
        let during = Samples()
        let done = LockedFlag()
        let reader = Thread { probe(port: port, "/v1/me/copies?limit=20", token: token, into: during) { !done.isSet } }
        reader.start()
        let deadline = ContinuousClock.now + .seconds(600)
        while ContinuousClock.now < deadline {
            for try await count in try await client.query("SELECT count(*)::int8 FROM alerts WHERE copy_id = \(copy)").decode(Int64.self) {
                result.alerts = Int(count)
            }
            if result.alerts >= result.expected { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        result.seconds = (ContinuousClock.now - begun).milliseconds / 1000
        done.set()
        try await Task.sleep(for: .milliseconds(200))
        result.idle = Percentiles(idle.all.latencies)
        result.during = Percentiles(during.all.latencies)
        result.duringCount = during.all.latencies.count
        return result
    }
}

final class LockedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}
