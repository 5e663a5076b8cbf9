import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// A few hundred random actions by three people (copies, pins, posts, wishes, readings, trades,
/// blocks, an erasure), each person's phone pulling sync now and then; at the end a store built
/// only from sync pages holds exactly what the server's own lists show that person.
@Suite struct SyncPropertyTests {
    @Test(arguments: [UInt64(7), 1_234, 98_765])
    func aClientBuiltOnlyFromSyncPagesEqualsTheServersViewOfItsUser(seed: UInt64) async throws {
        try await withApp { app in
            var world = World(app: app, random: SeededRandom(seed: seed))
            for _ in 0..<3 { try await world.join() }
            for step in 0..<240 {
                try await world.act(allowErasure: step > 180)
            }
            // One person always goes, whatever the dice said, so that what erasure leaves others is checked.
            if world.erased.isEmpty { try await world.erase(2) }
            #expect(world.erased.count == 1)
            var seen: Set<String> = []
            for person in world.people.indices where !world.erased.contains(person) {
                try await world.pull(person)
                let kinds = Dictionary(grouping: world.replicas[person].objects.keys) { String($0.prefix { $0 != "/" }) }.mapValues(\.count)
                seen.formUnion(kinds.keys)
                print("sync property, seed \(seed), person \(person)\(world.erased.isEmpty ? "" : " (one erased)"): \(kinds.sorted { $0.key < $1.key })")
                let server = try await world.serverView(person)
                let replica = world.replicas[person].objects
                #expect(Set(replica.keys) == Set(server.keys),
                        "seed \(seed), person \(person): only in sync \(Set(replica.keys).subtracting(server.keys)), only on the server \(Set(server.keys).subtracting(replica.keys))")
                for (key, json) in server where !key.hasPrefix("block/") {
                    if key.hasPrefix("copy/") || key.hasPrefix("pin/") || key.hasPrefix("wish/") {
                        #expect(replica[key] == json, "seed \(seed): \(key)")
                        continue
                    }
                    // Trades, posts, readings: a list adds what only its reader sees; every field both hold agrees.
                    let (shared, differing) = try Self.compareFields(replica[key], json)
                    #expect(shared >= 3 && differing.isEmpty, "seed \(seed): \(key) differs in \(differing) of \(shared)")
                }
            }
            #expect(seen.isSuperset(of: ["copy", "pin", "post", "wish", "reading", "trade"]), "seed \(seed): only \(seen)")
        }
    }

    /// How many top-level fields two objects' JSON texts both hold, and which of those differ.
    static func compareFields(_ left: String?, _ right: String) throws -> (shared: Int, differing: [String]) {
        func object(_ text: String?) throws -> [String: Any] {
            try JSONSerialization.jsonObject(with: Data((text ?? "{}").utf8)) as? [String: Any] ?? [:]
        }
        let (a, b) = (try object(left), try object(right))
        let shared = Set(a.keys).intersection(b.keys)
        let differing = try shared.filter { key in
            let pair = try [a[key], b[key]].map { try JSONSerialization.data(withJSONObject: [$0 ?? NSNull()], options: [.sortedKeys]) }
            return pair[0] != pair[1]
        }
        return (shared.count, differing.sorted())
    }
}

/// xorshift64*: the same actions for the same seed.
struct SeededRandom: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed == 0 ? 0x9E37_79B9_7F4A_7C15 : seed }
    mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 0x2545_F491_4F6C_DD1D
    }
}

struct World {
    let app: TestApp
    var random: SeededRandom
    var people: [TestApp.Account] = []
    var replicas: [SyncReplica] = []
    var tokens: [String?] = []
    var erased: Set<Int> = []
    var step = 0

    mutating func join() async throws {
        let person = try await app.registerTrader()
        _ = try await app.addPin(person.token, latitude: 52.5 + Double(people.count) / 100, longitude: 13.4)
        people.append(person)
        replicas.append(SyncReplica())
        tokens.append(nil)
    }

    /// The phone of `person` pulls every page since its token and applies it.
    mutating func pull(_ person: Int) async throws {
        let (changes, next) = try await app.syncAll(people[person].token, since: tokens[person], limit: 7)
        try replicas[person].apply(changes)
        tokens[person] = next
    }

    mutating func act(allowErasure: Bool) async throws {
        step += 1
        let live = people.indices.filter { !erased.contains($0) }
        guard let me = live.randomElement(using: &random), let other = live.filter({ $0 != me }).randomElement(using: &random) else { return }
        let token = people[me].token, app = self.app, step = self.step
        switch Int.random(in: 0..<100, using: &random) {
        case 0..<12: _ = try await app.request(.post, "/v1/me/copies", json: ["title": "Book \(step)", "authors": ["A"], "condition": "good"], token: token)
        case 12..<18: try await onOne("/v1/me/copies", token) { try await app.request(.patch, "/v1/copies/\($0)", json: ["notes": "step \(step)"], token: token) }
        case 18..<23: try await onOne("/v1/me/copies", token) { try await app.request(.delete, "/v1/copies/\($0)", token: token) }
        case 23..<27: _ = try await app.request(.post, "/v1/me/pins", json: ["label": "P\(step)", "latitude": 52.5, "longitude": 13.41, "kind": "meetup"], token: token)
        case 27..<30: try await onOne("/v1/me/pins", token) { try await app.request(.delete, "/v1/me/pins/\($0)", token: token) }
        case 30..<35: _ = try await app.request(.post, "/v1/posts", json: ["kind": "offer", "body": "Offer number \(step)"], token: token)
        case 35..<38: try await onOne("/v1/posts?author=\(people[me].username)", token) { try await app.request(.delete, "/v1/posts/\($0)", token: token) }
        case 38..<43: try await onBook(of: other) { try await app.request(.post, "/v1/me/wishes", json: ["book_id": $0, "radius_km": 50], token: token) }
        case 43..<46: try await onOne("/v1/me/wishes", token) { try await app.request(.delete, "/v1/me/wishes/\($0)", token: token) }
        case 46..<50: try await onBook(of: other) { try await app.request(.put, "/v1/me/readings/\($0)", json: ["state": "reading"], token: token) }
        case 50..<62: try await requestTrade(me, from: other)
        case 62..<80: try await actOnATrade(me)
        case 80..<84: _ = try await app.request(.put, "/v1/users/\(people[other].username)/block", token: token)
        case 84..<88: _ = try await app.request(.delete, "/v1/users/\(people[other].username)/block", token: token)
        case 88..<99: try await pull(me)
        default:
            guard allowErasure, erased.isEmpty, live.count == 3 else { return try await pull(me) }
            try await erase(me)
        }
    }

    mutating func erase(_ person: Int) async throws {
        let gone = try await app.request(.delete, "/v1/me", json: ["password": people[person].password], token: people[person].token)
        if gone.status == .accepted { erased.insert(person) }
    }

    /// `body` on one of the ids `path` lists for `token`, chosen at random.
    mutating func onOne(_ path: String, _ token: String, _ body: (String) async throws -> TestResponse) async throws {
        if let id = try await app.page(path + (path.contains("?") ? "&" : "?") + "limit=100", token: token).ids.randomElement(using: &random) {
            _ = try await body(id)
        }
    }

    mutating func onBook(of person: Int, _ body: (String) async throws -> TestResponse) async throws {
        let copies = try await app.request(.get, "/v1/me/copies?limit=100", token: people[person].token).jsonObject()["data"] as? [[String: Any]] ?? []
        if let book = (copies.randomElement(using: &random)?["book"] as? [String: Any])?["id"] as? String { _ = try await body(book) }
    }

    mutating func requestTrade(_ me: Int, from other: Int) async throws {
        let copies = try await app.request(.get, "/v1/me/copies?limit=100", token: people[other].token).jsonObject()["data"] as? [[String: Any]] ?? []
        guard let copy = copies.filter({ $0["status"] as? String == "available" }).randomElement(using: &random)?["id"] as? String else { return }
        let kind = ["gift", "loan", "swap"].randomElement(using: &random) ?? "gift"
        var offered: String?
        if kind == "swap" {
            offered = try await app.page("/v1/me/copies?limit=100", token: people[me].token).ids.randomElement(using: &random)
            if offered == nil { return }
        }
        _ = try await app.requestTrade(people[me].token, copy: copy, kind: kind, offered: offered)
    }

    /// One of the actions the trade's view offers `me` now, on one of my trades.
    mutating func actOnATrade(_ me: Int) async throws {
        let trades = try await app.request(.get, "/v1/me/trades?limit=100", token: people[me].token).jsonObject()["data"] as? [[String: Any]] ?? []
        guard let trade = trades.randomElement(using: &random), let id = trade["id"] as? String,
              let action = (trade["actions"] as? [String])?.filter({ $0 != "counter" && $0 != "rating" }).randomElement(using: &random) else { return }
        _ = try await app.act(action, id, people[me].token)
    }

    /// What the server's own reads show `person`: "type/id" → the object's JSON.
    func serverView(_ person: Int) async throws -> [String: String] {
        let token = people[person].token
        var view: [String: String] = [:]
        let lists = [("copy", "/v1/me/copies"), ("pin", "/v1/me/pins"), ("wish", "/v1/me/wishes"), ("trade", "/v1/me/trades"),
                     ("post", "/v1/posts?author=\(people[person].username)"), ("reading", "/v1/me/readings")]
        for (kind, path) in lists {
            var cursor: String?
            repeat {
                let url = path + (path.contains("?") ? "&" : "?") + "limit=100" + (cursor.map { "&cursor=\($0)" } ?? "")
                let body = try await app.request(.get, url, token: token).jsonObject()
                for object in body["data"] as? [[String: Any]] ?? [] {
                    let id = kind == "reading" ? ((object["book"] as? [String: Any])?["id"] as? String ?? object["book_id"] as? String) : object["id"] as? String
                    let json = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
                    view["\(kind)/\(id ?? "?")"] = String(decoding: json, as: UTF8.self)
                }
                cursor = body["next_cursor"] as? String
            } while cursor != nil
        }
        for try await block in try await app.db.query("SELECT id FROM blocks WHERE blocker_id = \(UUID(uuidString: people[person].id))")
            .decode(UUID.self) {
            view["block/\(block.apiString)"] = ""
        }
        return view
    }
}
