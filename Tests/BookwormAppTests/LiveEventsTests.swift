import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Live updates over real `bookworm serve` processes on one database: a write through one
/// process reaches the streams of another through PostgreSQL's notifications.
@Suite(.serialized) struct LiveEventsTests {
    struct Person {
        let token: String
        let id: String
        let username: String
    }

    static func register(_ port: Int, _ name: String, db: PostgresClient) async throws -> Person {
        let username = "\(name)_\(UUID().uuidString.prefix(6).lowercased())"
        let answer = try rawRequest(port: port, "POST", "/v1/auth/register",
                                    json: #"{"email":"\#(username)@example.org","username":"\#(username)","password":"correct horse battery"}"#)
        guard answer.status == 201, let token = answer.json?["token"] as? String,
              let id = (answer.json?["user"] as? [String: Any])?["id"] as? String else { throw TestFailure("register: \(answer.status) \(answer.body)") }
        try await db.query("UPDATE users SET email_verified_at = now() WHERE username = \(username)")
        return Person(token: token, id: id, username: username)
    }

    static func write(_ port: Int, _ method: String, _ path: String, _ json: String?, _ person: Person, expect: Int = 201) throws -> [String: Any] {
        let answer = try rawRequest(port: port, method, path, json: json, token: person.token)
        guard answer.status == expect else { throw TestFailure("\(method) \(path): \(answer.status) \(answer.body)") }
        return answer.json ?? [:]
    }

    static func pin(_ port: Int, _ person: Person, latitude: Double, longitude: Double) throws {
        _ = try write(port, "POST", "/v1/me/pins", #"{"label":"meet","kind":"meetup","latitude":\#(latitude),"longitude":\#(longitude)}"#, person)
    }

    static func stream(_ port: Int, _ path: String, _ person: Person, lastEventID: String? = nil, receiveBuffer: Int32? = nil) async throws
        -> EventStreamClient
    {
        try await offThePool { try EventStreamClient(port: port, path: path, token: person.token, lastEventID: lastEventID, receiveBuffer: receiveBuffer) }
    }

    static func twoServers(_ environment: [String: String] = [:], _ body: @Sendable (ServerProcess, ServerProcess, PostgresClient) async throws -> Void)
        async throws
    {
        try await withTestDatabase { settings, client in
            let a = try await ServerProcess(databaseURL: settings.connectionURL, environment: environment)
            defer { a.stop() }
            let b = try await ServerProcess(databaseURL: settings.connectionURL, environment: environment)
            defer { b.stop() }
            try await body(a, b, client)
        }
    }

    @Test func aWriteThroughOneProcessPokesAStreamOnTheOtherAndThePullHasExactlyIt() async throws {
        try await Self.twoServers { a, b, db in
            let owner = try await Self.register(a.port, "owner", db: db), asker = try await Self.register(b.port, "asker", db: db)
            let synced = try Self.write(a.port, "GET", "/v1/sync", nil, owner, expect: 200)
            let mine = try await Self.stream(a.port, "/v1/me/events", owner)
            #expect(mine.status == 200 && mine.headers["content-type"]?.hasPrefix("text/event-stream") == true)
            // Its connection serves no other request (the server reads nothing more on it), and
            // a stream request has no body.
            #expect(mine.headers["connection"] == "close")
            _ = try Self.write(a.port, "GET", "/v1/me/events", "{}", owner, expect: 400)
            // Without Last-Event-ID the stream starts with a poke: the app pulls once.
            let first = try #require(await offThePool { mine.next("sync") })
            #expect(first.id != nil && first.json?["token"] as? String == first.id)

            let copy = try Self.write(b.port, "POST", "/v1/me/copies", #"{"title":"Live Wire","authors":["A"],"condition":"good"}"#, owner)
            let poke = try #require(await offThePool { mine.next("sync") })
            let since = try #require(synced["next"] as? String)
            let pulled = try Self.write(a.port, "GET", "/v1/sync?since=\(since)", nil, owner, expect: 200)
            let changes = try #require(pulled["changes"] as? [[String: Any]])
            #expect(changes.map { $0["id"] as? String } == [copy["id"] as? String])
            #expect(poke.json?["token"] as? String == poke.id)

            // A trade request through B: the owner's stream on A hears it, as the mail goes out.
            let trade = try Self.write(b.port, "POST", "/v1/trades", #"{"copy_id":"\#(copy["id"] as? String ?? "")","kind":"gift"}"#, asker)
            let heard = try #require(await offThePool { mine.next("trade") })
            #expect(heard.json?["id"] as? String == trade["id"] as? String)
            #expect(heard.json?["kind"] as? String == "requested")
            let contact = try Self.write(b.port, "POST", "/v1/contact",
                                         #"{"copy_id":"\#(copy["id"] as? String ?? "")","message":"Still there?","share_email":false}"#, asker, expect: 202)
            let contacted = try #require(await offThePool { mine.next("contact") })
            #expect(contacted.json?["id"] as? String == contact["id"] as? String && contacted.json?["kind"] as? String == "copy")
        }
    }

    @Test func anAlertMadeByAWorkerProcessReachesTheWishersStream() async throws {
        try await withTestDatabase { settings, db in
            let a = try await ServerProcess(databaseURL: settings.connectionURL)
            defer { a.stop() }
            let worker = try ChildProcess.spawn(try bookwormBinary(), ["worker"],
                                                environment: bookwormEnvironment(["DATABASE_URL": settings.connectionURL]))
            defer {
                kill(worker, SIGTERM)
                _ = ChildProcess.wait(worker)
            }
            let wisher = try await Self.register(a.port, "wisher", db: db), owner = try await Self.register(a.port, "lister", db: db)
            try Self.pin(a.port, wisher, latitude: 52.52, longitude: 13.405)
            try Self.pin(a.port, owner, latitude: 52.53, longitude: 13.41)
            let book = try Self.write(a.port, "POST", "/v1/books", #"{"title":"The Dispossessed","authors":["Ursula K. Le Guin"]}"#, owner)
            let bookID = try #require(book["id"] as? String)
            _ = try Self.write(a.port, "POST", "/v1/me/wishes", #"{"book_id":"\#(bookID)"}"#, wisher)
            let mine = try await Self.stream(a.port, "/v1/me/events", wisher)
            _ = try Self.write(a.port, "POST", "/v1/me/copies", #"{"book_id":"\#(bookID)","condition":"good"}"#, owner)
            let alert = try #require(await offThePool { mine.next("alert", timeout: 60) })
            let listed = try Self.write(a.port, "GET", "/v1/me/alerts", nil, wisher, expect: 200)
            let ids = (listed["data"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
            #expect(ids.contains(alert.json?["id"] as? String ?? "-") && alert.json?["kind"] as? String == "available")
        }
    }

    @Test func aPokeWaitsUntilAnOlderTransactionEndsSoThePullFindsTheChange() async throws {
        try await Self.twoServers { a, b, db in
            let person = try await Self.register(a.port, "patient", db: db)
            let mine = try await Self.stream(a.port, "/v1/me/events", person)
            var start = try #require(await offThePool { mine.next("sync") }?.id)
            // The registration's own poke may still be on its way (another transaction held the
            // horizon when the stream opened, on a busy machine): it comes before the write's.
            while let late = try await offThePool({ mine.next("sync", timeout: 1) }) { start = late.id ?? start }
            try await db.withConnection { older in
                // A transaction with an id, begun before the write and still open after it:
                // sync serves nothing newer than it, so a poke now would pull nothing.
                try await older.query("BEGIN")
                try await older.query("SELECT pg_current_xact_id()")
                _ = try Self.write(b.port, "POST", "/v1/me/copies", #"{"title":"Held back","authors":["A"],"condition":"good"}"#, person)
                #expect(try await offThePool { mine.next("sync", timeout: 1) } == nil)
                try await older.query("COMMIT")
            }
            let poke = try #require(await offThePool { mine.next("sync") })
            let pulled = try Self.write(a.port, "GET", "/v1/sync?since=\(start)", nil, person, expect: 200)
            #expect((pulled["changes"] as? [[String: Any]])?.count == 1)
            #expect(poke.id != start)
        }
    }

    @Test func aReconnectWithLastEventIDIsPokedOnlyWhenSomethingChangedSince() async throws {
        try await Self.twoServers { a, b, db in
            let owner = try await Self.register(a.port, "resumer", db: db)
            let first = try await Self.stream(a.port, "/v1/me/events", owner)
            let id = try #require(await offThePool { first.next("sync") }?.id)
            first.socket.shutdownWrite()
            // Nothing changed: the stream says where it stands and pokes no one.
            let quiet = try await Self.stream(b.port, "/v1/me/events", owner, lastEventID: id)
            let position = try #require(await offThePool { quiet.next(timeout: 20, skipping: "resync") })
            // Its position (other tests' writes move it on, this user's did not): no poke.
            #expect(position.event == nil && position.id != nil)
            // A change while disconnected: the reconnect is poked at once.
            _ = try Self.write(b.port, "POST", "/v1/me/copies", #"{"title":"Missed","authors":["A"],"condition":"good"}"#, owner)
            let again = try await Self.stream(a.port, "/v1/me/events", owner, lastEventID: id)
            let poke = try #require(await offThePool { again.next(timeout: 20, skipping: "resync") })
            #expect(poke.event == "sync" && poke.id != id)
        }
    }

    @Test func aPostReachesLiveFeedsWithinItsRadiusButNotBeyondItOrAcrossABlock() async throws {
        try await Self.twoServers { a, b, db in
            let author = try await Self.register(b.port, "author", db: db), other = try await Self.register(b.port, "other", db: db)
            let near = try await Self.register(a.port, "near", db: db), far = try await Self.register(a.port, "far", db: db)
            let blocker = try await Self.register(a.port, "blocker", db: db)
            _ = try Self.write(a.port, "PUT", "/v1/users/\(author.username)/block", nil, blocker, expect: 204)
            try Self.pin(b.port, author, latitude: 48.8566, longitude: 2.3522)  // Paris
            try Self.pin(b.port, other, latitude: 49.4, longitude: 2.3522)  // 60 km north
            let feed = "/v1/posts/live?latitude=48.86&longitude=2.35&radius_km="
            let streams = [try await Self.stream(a.port, feed + "20", near), try await Self.stream(a.port, feed + "100", blocker),
                           try await Self.stream(a.port, "/v1/posts/live?latitude=49.5&longitude=2.35&radius_km=20", far)]
            for stream in streams {
                let ready = try #require(await offThePool { stream.next(timeout: 20, skipping: "resync") })
                #expect(ready.event == "ready" && (ready.json?["cursor"] as? String)?.count == 32)
            }
            let post = try Self.write(b.port, "POST", "/v1/posts", #"{"kind":"offer","body":"Dune, first edition"}"#, author)
            let second = try Self.write(b.port, "POST", "/v1/posts", #"{"kind":"wanted","body":"Anything by Le Guin"}"#, other)
            // Each stream's first post: near sees the author's (within 20 km); the blocker and
            // the far viewer see only the second, the first never reaching them.
            let seen = try await offThePool { streams.map { $0.next("post") } }.map { $0?.json }
            #expect(seen[0]?["id"] as? String == post["id"] as? String)
            #expect((seen[0]?["distance_km"] as? Double).map { $0 < 2 } == true)
            #expect((seen[0]?["author"] as? [String: Any])?["username"] as? String == author.username)
            #expect(seen[1]?["id"] as? String == second["id"] as? String)
            #expect(seen[2]?["id"] as? String == second["id"] as? String)
        }
    }

    @Test func aRevokedSessionsStreamEndsAndOthersGoOn() async throws {
        try await Self.twoServers { a, b, db in
            let person = try await Self.register(a.port, "leaver", db: db)
            let login = try rawRequest(port: b.port, "POST", "/v1/auth/login", json: #"{"login":"\#(person.username)","password":"correct horse battery"}"#)
            let second = Person(token: try #require(login.json?["token"] as? String), id: person.id, username: person.username)
            let revoked = try await Self.stream(a.port, "/v1/me/events", person), kept = try await Self.stream(a.port, "/v1/me/events", second)
            _ = try await offThePool { (revoked.next("sync"), kept.next("sync")) }
            _ = try Self.write(b.port, "POST", "/v1/auth/logout", nil, person, expect: 204)
            #expect(try await offThePool { revoked.endsWithin(30) })
            _ = try Self.write(b.port, "POST", "/v1/me/copies", #"{"title":"Still here","authors":["A"],"condition":"good"}"#, second)
            #expect(try await offThePool { kept.next("sync") } != nil)
        }
    }

    @Test func streamLimitsCloseTheOldestOfAUserAndRefuseBeyondTheProcess() async throws {
        try await Self.twoServers(["BOOKWORM_MAX_STREAMS": "7"]) { a, _, db in
            let person = try await Self.register(a.port, "many", db: db), other = try await Self.register(a.port, "other", db: db)
            var open: [EventStreamClient] = []
            for _ in 0..<6 { open.append(try await Self.stream(a.port, "/v1/me/events", person)) }
            let oldest = open[0]
            let bye = try await offThePool { oldest.next("bye") }
            #expect(bye?.json?["reason"] as? String == "too_many_streams")
            #expect(try await offThePool { oldest.endsWithin(30) && oldest.closedWithin(30) })
            for _ in 0..<2 { open.append(try await Self.stream(a.port, "/v1/me/events", other)) }
            let refused = try await Self.stream(a.port, "/v1/me/events", other)
            #expect(refused.status == 503 && refused.headers["retry-after"] != nil, "\(refused.status) \(refused.headers)")
        }
    }

    @Test func aReaderThatStopsReadingIsDroppedWhileOneThatReadsKeepsUpAndMemoryStaysFlat() async throws {
        try await Self.twoServers(["BOOKWORM_EVENTS_HEARTBEAT_SECONDS": "3"]) { a, _, db in
            let person = try await Self.register(a.port, "stalled", db: db)
            let stalled = try await Self.stream(a.port, "/v1/me/events", person, receiveBuffer: 4096)
            let reader = try await Self.stream(a.port, "/v1/me/events", person)
            let before = try Self.residentKiB(a.pid)
            // 600 transactions of 100 notices (~13 KB each, 8 MB in all: more than the kernel
            // buffers of a socket): the reader drains them as they come, the other reads nothing.
            let total = 60_000
            async let counted = offThePool { reader.count("trade", atLeast: total, timeout: 120) }
            for block in 1...(total / 100) {
                try await db.query("""
                    SELECT pg_notify('events', 'n ' || \(person.id) || ' trade ' || gen_random_uuid() || ' requested')
                    FROM generate_series(1, 100)
                    """)
                // At the pace the reader reads (a loaded machine may slow it), never far ahead.
                if block % 5 == 0 { _ = try await eventually(within: 60) { reader.counted.load(ordering: .relaxed) >= block * 100 - 1000 } }
            }
            let heard = try await counted
            #expect(heard == total, "the reader heard \(heard) of \(total)\n\(a.log.suffix(2000))")
            #expect(try await offThePool { stalled.endsWithin(30) })
            let after = try Self.residentKiB(a.pid)
            #expect(after - before < 32 * 1024, "RSS grew from \(before) to \(after) KiB")
            _ = try Self.write(a.port, "POST", "/v1/me/copies", #"{"title":"After","authors":["A"],"condition":"good"}"#, person)
            #expect(try await offThePool { reader.next("sync") } != nil)
        }
    }

    @Test func sigtermSaysByeToEveryStreamBeforeTheProcessExits() async throws {
        try await Self.twoServers { a, _, db in
            let person = try await Self.register(a.port, "bye", db: db)
            let mine = try await Self.stream(a.port, "/v1/me/events", person)
            let posts = try await Self.stream(a.port, "/v1/posts/live?latitude=1&longitude=1", person)
            _ = try await offThePool { (mine.next("sync"), posts.next("ready")) }
            kill(a.pid, SIGTERM)
            let byes = try await offThePool { (mine.next("bye"), posts.next("bye")) }
            #expect(byes.0 != nil && byes.1 != nil)
            #expect(try await offThePool { mine.endsWithin(10) && posts.endsWithin(10) })
        }
    }

    @Test func aDatabaseRestartedMidStreamTellsTheStreamToResync() async throws {
        let folder = TestDatabaseServer.dataDirectory + "/live-" + String(UUID().uuidString.prefix(8))
        let cluster = EmbeddedPostgres(dataDirectory: folder, logger: Logger(label: "live"), fastAndLoose: true)
        let settings = try await cluster.start(database: "bookworm")
        defer {
            cluster.stop()
            try? FileManager.default.removeItem(atPath: folder)
        }
        let server = try await ServerProcess(databaseURL: settings.connectionURL)
        defer { server.stop() }
        let answer = try rawRequest(port: server.port, "POST", "/v1/auth/register",
                                    json: #"{"email":"restart@example.org","username":"restart_me","password":"correct horse battery"}"#)
        let person = Person(token: try #require(answer.json?["token"] as? String), id: "", username: "restart_me")
        let stream = try await Self.stream(server.port, "/v1/me/events", person)
        #expect(try await offThePool { stream.next("sync") } != nil)
        cluster.stop()
        _ = try await cluster.start(database: "bookworm")
        // The listener is back on a new connection: whatever it missed, the client pulls.
        #expect(try await offThePool { stream.next("resync", timeout: 60) } != nil)
    }

    static func residentKiB(_ pid: pid_t) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kib = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") else {
            throw TestFailure("no VmRSS for \(pid)")
        }
        return kib
    }
}
