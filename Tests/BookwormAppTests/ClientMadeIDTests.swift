import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// Client-made ids on `POST` of copies, pins, posts and wishes (API.md, "Safe retries").
@Suite struct ClientMadeIDTests {
    /// A UUID of version 7 (RFC 9562): 48 bits of milliseconds, then random bits.
    static func version7() -> UUID {
        var bytes = (0..<16).map { _ in UInt8.random(in: 0...255) }
        let millis = UInt64(Date().timeIntervalSince1970 * 1000)
        for index in 0..<6 { bytes[index] = UInt8(truncatingIfNeeded: millis >> (40 - 8 * UInt64(index))) }
        bytes[6] = 0x70 | (bytes[6] & 0x0f)
        bytes[8] = 0x80 | (bytes[8] & 0x3f)
        return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                           bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }

    /// Twenty writes a phone queued offline: five pins, five copies, five posts, five wishes.
    static func queue() -> [(path: String, body: String, table: String)] {
        let ids = (0..<20).map { $0 % 2 == 0 ? UUID().uuidString.lowercased() : version7().uuidString.lowercased() }
        var writes: [(String, String, String)] = []
        for index in 0..<5 {
            writes.append(("/v1/me/pins", #"{"id":"\#(ids[index])","label":"Spot \#(index)","latitude":52.5\#(index),"longitude":13.4,"kind":"meetup"}"#, "pins"))
        }
        for index in 0..<5 {
            writes.append(("/v1/me/copies", #"{"id":"\#(ids[5 + index])","title":"Book \#(index)","authors":["Author \#(index)"],"condition":"good"}"#, "copies"))
        }
        for index in 0..<5 {
            writes.append(("/v1/posts", #"{"id":"\#(ids[10 + index])","kind":"wanted","body":"Looking for book number \#(index)"}"#, "posts"))
        }
        return writes
    }

    static func count(_ app: TestApp, _ table: String) async throws -> Int {
        try await app.count("SELECT count(*)::int8 FROM \(table)", user: "")
    }

    @Test func anOfflineQueueOfTwentyWritesReplayedTwiceLeavesTwentyObjects() async throws {
        try await withApp { app in
            let me = try await app.register()
            var writes = Self.queue()
            // The wishes are for the books the copies made, so they join the queue once those exist.
            for round in 0..<3 {
                var books: [String] = []
                for write in writes {
                    let answer = try await app.request(.post, write.path, raw: write.body, token: me.token)
                    #expect(answer.status == (round == 0 ? .created : .ok), "\(write.path) \(String(buffer: answer.body))")
                    let sent = try JSONSerialization.jsonObject(with: Data(write.body.utf8)) as? [String: Any]
                    #expect(try answer.jsonObject()["id"] as? String == sent?["id"] as? String)
                    if write.table == "copies", let book = (try answer.jsonObject()["book"] as? [String: Any])?["id"] as? String {
                        books.append(book)
                    }
                }
                if round == 0 {
                    writes += books.map { ("/v1/me/wishes", #"{"id":"\#(UUID().uuidString.lowercased())","book_id":"\#($0)","radius_km":10}"#, "wishes") }
                    for wish in writes.suffix(5) {
                        #expect(try await app.request(.post, wish.path, raw: wish.body, token: me.token).status == .created)
                    }
                }
            }
            for table in ["pins", "copies", "posts", "wishes"] {
                #expect(try await Self.count(app, table) == 5, "\(table)")
            }
        }
    }

    @Test func anIdWithOtherContentOrOfAnotherUsersObjectIsIdConflictAndTellsNothing() async throws {
        try await withApp { app in
            let (me, other) = (try await app.register(), try await app.register())
            let id = UUID().uuidString
            let secret = "A title only its owner knows"
            let theirs = try await app.request(.post, "/v1/me/copies", raw: #"{"id":"\#(id)","title":"\#(secret)","authors":["X"],"condition":"good"}"#,
                                               token: other.token)
            #expect(theirs.status == .created)
            for token in [me.token, other.token] {
                let clash = try await app.request(.post, "/v1/me/copies", raw: #"{"id":"\#(id)","title":"Another","authors":["Y"],"condition":"poor"}"#,
                                                  token: token)
                #expect(clash.status == .conflict)
                #expect(try clash.jsonObject()["type"] as? String == "https://bookworm.example/problems/id_conflict")
                #expect(try clash.problemFields() == ["id"])
                #expect(!String(buffer: clash.body).contains(secret))
            }
            let same = try await app.request(.post, "/v1/me/copies", raw: #"{"id":"\#(id)","title":"\#(secret)","authors":["X"],"condition":"good"}"#,
                                             token: me.token)
            #expect(same.status == .conflict)
            let pin = #"{"id":"\#(id)","label":"Home","latitude":52.5,"longitude":13.4,"kind":"home"}"#
            #expect(try await app.request(.post, "/v1/me/pins", raw: pin, token: me.token).status == .created)
            let moved = pin.replacingOccurrences(of: "52.5", with: "48.1")
            #expect(try await app.request(.post, "/v1/me/pins", raw: moved, token: me.token).status == .conflict)
            #expect(try await app.request(.post, "/v1/me/pins", raw: pin, token: other.token).status == .conflict)
            let post = #"{"id":"\#(id)","kind":"wanted","body":"Anyone have Dune?"}"#
            #expect(try await app.request(.post, "/v1/posts", raw: post, token: me.token).status == .created)
            #expect(try await app.request(.post, "/v1/posts", raw: post, token: other.token).status == .conflict)
            #expect(try await Self.count(app, "copies") == 1)
        }
    }

    /// A phone retrying while its first try is still on the way: the same create sent eight
    /// times at once makes one copy; one answer is 201 and the others 200 with that copy.
    @Test func identicalCreatesWithOneIdAtOnceMakeOneCopyAndAnswerItToAll() async throws {
        try await withApp { app in
            let me = try await app.register()
            let id = UUID().uuidString.lowercased()
            let body = #"{"id":"\#(id)","title":"Kindred","authors":["Octavia E. Butler"],"condition":"good"}"#
            let answers = try await withThrowingTaskGroup(of: TestResponse.self) { group in
                for _ in 0..<8 { group.addTask { try await app.request(.post, "/v1/me/copies", raw: body, token: me.token) } }
                return try await group.reduce(into: [TestResponse]()) { $0.append($1) }
            }
            #expect(answers.map(\.status.code).sorted() == [200, 200, 200, 200, 200, 200, 200, 201])
            #expect(try answers.allSatisfy { try $0.jsonObject()["id"] as? String == id })
            #expect(try await app.count("SELECT count(*)::int8 FROM copies WHERE owner_id = $USER", user: me.id) == 1)
        }
    }

    @Test func anIdThatIsNotAVersion4Or7UUIDIs400() async throws {
        try await withApp { app in
            let me = try await app.register()
            for bad in ["00000000-0000-1000-8000-000000000000", "not-a-uuid", "6ba7b810-9dad-41d1-00b4-00c04fd430c8"] {
                let answer = try await app.request(.post, "/v1/me/copies",
                                                   raw: #"{"id":"\#(bad)","title":"T","authors":["A"],"condition":"good"}"#, token: me.token)
                #expect(answer.status == .badRequest, "\(bad)")
            }
            #expect(try await Self.count(app, "copies") == 0)
        }
    }
}
