import Foundation
import HummingbirdTesting
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Portability
@testable import BookwormTestSupport

/// `DELETE /v1/me`: the account is erased, others keep their history with a "Deleted user".
@Suite struct ErasureTests {
    @Test func erasingLeavesNothingThatPointsAtThePerson() async throws {
        try await withApp { app in
            let gone = try await app.registerTrader()
            let other = try await app.registerTrader()
            let user = try #require(UUID(uuidString: gone.id))
            // A life on the service: a phone, pins, copies (one with a photo), posts, shelf, wishes, blocks, trades both ways.
            #expect(try await app.registerDevice(gone.token, token: String(repeating: "ab", count: 32)).status == .created)
            try await app.addPin(gone.token)
            let mine = try await app.copyID(gone.token, title: "Given Away")
            let kept = try await app.copyID(gone.token, title: "Still Mine")
            try await app.db.query("INSERT INTO photos (id, content_type, bytes) VALUES (repeat('a', 64), 'image/png', '\\x00')")
            try await app.db.query("UPDATE copies SET photo_id = repeat('a', 64) WHERE id = \(UUID(uuidString: kept))")
            try await app.addPost(gone.token)
            let theirs = try await app.copyID(other.token, title: "Theirs")
            let book = try #require(try await app.request(.get, "/v1/copies/\(theirs)").jsonObject()["book"] as? [String: Any])
            _ = try await app.request(.put, "/v1/me/readings/\(book["id"] as? String ?? "")", json: ["state": "finished"], token: gone.token)
            _ = try await app.wish(gone.token, book: book["id"] as? String ?? "")
            _ = try await app.request(.put, "/v1/users/\(other.username)/block", token: gone.token)
            _ = try await app.request(.delete, "/v1/users/\(other.username)/block", token: gone.token)
            let stranger = try await app.register()
            _ = try await app.request(.put, "/v1/users/\(gone.username)/block", token: stranger.token)
            // A completed gift (rated both ways) and an open request for someone else's copy.
            let done = try await app.trade(other.token, copy: mine)
            for (action, token) in [("accept", gone.token), ("confirm", gone.token), ("confirm", other.token)] {
                #expect(try await app.act(action, done, token).status == .ok)
            }
            _ = try await app.act("rating", done, other.token, json: ["score": 5])
            _ = try await app.act("rating", done, gone.token, json: ["score": 4])
            let open = try await app.trade(gone.token, copy: theirs)
            #expect(try await app.act("accept", open, other.token).status == .ok)

            let erased = try await app.request(.delete, "/v1/me", json: ["password": gone.password], token: gone.token)
            #expect(erased.status == .accepted)

            // Every uuid column of every table: nothing holds the person's id.
            let columns = try await app.db.query("""
                SELECT c.table_name, c.column_name FROM information_schema.columns c
                JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
                WHERE c.table_schema = 'public' AND c.data_type = 'uuid' AND t.table_type = 'BASE TABLE'
                """)
            var references: [String] = []
            var checked = 0
            for try await (table, column) in columns.decode((String, String).self) {
                checked += 1
                let rows = try await app.db.query(PostgresQuery(unsafeSQL: "SELECT count(*)::int8 FROM \(table) WHERE \(column) = '\(user.uuidString)'"))
                for try await count in rows.decode(Int64.self) where count > 0 { references.append("\(table).\(column)") }
            }
            #expect(checked > 30)
            #expect(references.isEmpty, "\(references)")
            // Nor its address, name or username anywhere but the one confirmation still to send.
            let traces = try await app.db.query("""
                SELECT (SELECT count(*) FROM users WHERE email = \(gone.email) OR username = \(gone.username))::int8,
                       (SELECT count(*) FROM outbox_messages WHERE recipient = \(gone.email) AND kind <> 'account_deleted')::int8,
                       (SELECT count(*) FROM outbox_messages WHERE recipient = \(gone.email) AND kind = 'account_deleted')::int8,
                       (SELECT count(*) FROM throttle_events WHERE key ILIKE '%' || \(gone.id) || '%')::int8,
                       (SELECT count(*) FROM photos)::int8
                """)
            for try await row in traces.decode((Int64, Int64, Int64, Int64, Int64).self) {
                #expect(row.0 == 0 && row.1 == 0 && row.3 == 0)
                #expect(row.2 == 1)
                #expect(row.4 == 0)
            }

            // The sessions are gone; the password opens nothing.
            #expect(try await app.request(.get, "/v1/me", token: gone.token).status == .unauthorized)
            let login = try await app.request(.post, "/v1/auth/login", json: ["login": gone.username, "password": gone.password])
            #expect(login.status == .unauthorized)

            // The other side: the open trade was cancelled and they were told; the gift keeps a "Deleted user".
            let cancelled = try await app.request(.get, "/v1/trades/\(open)", token: other.token).jsonObject()
            #expect(cancelled["state"] as? String == "cancelled")
            #expect(try await app.copyRow(theirs).status == "available")
            let told = try await app.tradeMails().filter { $0.to == other.email }
            #expect(told.contains { $0.subject.lowercased().contains("cancel") })
            let history = try await app.request(.get, "/v1/trades/\(done)", token: other.token).jsonObject()
            let owner = history["owner"] as? [String: Any]
            #expect(owner?["display_name"] as? String == "Deleted user")
            #expect(owner?["username"] as? String != gone.username)
        }
    }

    @Test func theUsernameIsHeldForThirtyDays() async throws {
        try await withApp { app in
            let gone = try await app.register()
            #expect(try await app.request(.delete, "/v1/me", json: ["password": gone.password], token: gone.token).status == .accepted)
            let again = try await app.request(.post, "/v1/auth/register",
                                              json: ["email": "new@example.org", "username": gone.username.uppercased(), "password": "another good one"],
                                              from: "203.0.113.9")
            #expect(again.status == .conflict)
            app.clock.advance(by: 31 * 86400)
            try await ErasureSweep(client: app.db, logger: Logger(label: "t")).lift(before: app.clock.now())
            let later = try await app.request(.post, "/v1/auth/register",
                                              json: ["email": "new@example.org", "username": gone.username, "password": "another good one"],
                                              from: "203.0.113.9")
            #expect(later.status == .created)
        }
    }

    @Test func theConfirmationReachesTheOldAddressAndThenItsTraceIsErased() async throws {
        try await withSink { sink in
            try await withApp { app in
                let gone = try await app.register()
                #expect(try await app.request(.delete, "/v1/me", json: ["password": gone.password], token: gone.token).status == .accepted)
                try await app.deliver(to: sink)
                let mails = sink.messages().filter { $0.envelopeTo.contains(gone.email) }
                #expect(mails.count == 1)
                #expect(mails.first?.body.contains("Your account \(gone.username) was deleted") == true)
                try await ErasureSweep(client: app.db, logger: Logger(label: "t")).scrubConfirmations()
                #expect(try await app.count("SELECT count(*)::int8 FROM outbox_messages WHERE recipient = $USER OR content LIKE '%' || $USER || '%'",
                                            user: gone.email) == 0)
            }
        }
    }

    @Test func aRegistrationRacingAnErasureNeverTakesTheHeldName() async throws {
        try await withApp { app in
            let gone = try await app.register()
            let name = gone.username
            let log = Logger(label: "t")
            try await app.db.withConnection { blocker in
                // Hold the erasure still after it deleted the user row and before it holds the name:
                // an uncommitted hold of the same name makes its insert wait.
                try await blocker.query("BEGIN", logger: log)
                try await blocker.query("INSERT INTO username_holds (username, until) VALUES (lower(\(name)), now())", logger: log)
                async let erased = app.request(.delete, "/v1/me", json: ["password": gone.password], token: gone.token)
                #expect(try await eventually { try await app.waiting(on: "INSERT INTO username_holds") })
                // Now a registration of the same name: it must wait for the erasure, then see the hold.
                async let taken = app.request(.post, "/v1/auth/register",
                                              json: ["email": "racer@example.org", "username": name, "password": "a racing password"],
                                              from: "203.0.113.7")
                #expect(try await eventually { try await app.waiting(on: "INSERT INTO users") })
                try await blocker.query("ROLLBACK", logger: log)
                let (erasure, registration) = try await (erased, taken)
                #expect(erasure.status == .accepted)
                #expect(registration.status == .conflict)
            }
        }
    }

    @Test func aWrongOrMissingPasswordErasesNothing() async throws {
        try await withApp { app in
            let me = try await app.register()
            try await app.addCopy(me.token)
            let wrong = try await app.request(.delete, "/v1/me", json: ["password": "not my password"], token: me.token)
            #expect(wrong.status == .unprocessableContent)
            #expect(try wrong.problemFields() == ["password"])
            for body in [[String: any Sendable](), ["password": 12], ["password": "x", "also": true]] {
                let response = try await app.request(.delete, "/v1/me", json: body, token: me.token)
                #expect(response.status == .badRequest, "\(body)")
            }
            #expect(try await app.request(.delete, "/v1/me", json: ["password": me.password]).status == .unauthorized)
            #expect(try await app.request(.get, "/v1/me/copies", token: me.token).jsonObject()["data"] as? [Any] != nil)
            let copies = try await app.request(.get, "/v1/me/copies", token: me.token).jsonObject()["data"] as? [Any]
            #expect(copies?.count == 1)
        }
    }
}
