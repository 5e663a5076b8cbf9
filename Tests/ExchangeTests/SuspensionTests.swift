import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Exchange
@testable import BookwormTestSupport

/// Suspension from the command line, end to end: the real `bookworm` executable on the test's
/// database, the API answering as others would see it.
@Suite struct SuspensionTests {
    @Test func suspendingFromTheCommandLineHidesEverythingUntilLifted() async throws {
        try await withApp { app in
            let ana = try await app.wisher(at: 52.52, 13.405)
            let mallory = try await app.wisher(at: 52.521, 13.406)
            let (mallorysCopy, mallorysBook) = try await app.offer(mallory.token, title: "Austerlitz", authors: ["W. G. Sebald"])
            let anasBook = try await app.offer(ana.token, title: "Beloved", authors: ["Toni Morrison"]).book
            #expect(try await app.wish(ana.token, book: mallorysBook).status == .created)
            #expect(try await app.wish(mallory.token, book: anasBook).status == .created)
            let post = try #require(try await app.addPost(mallory.token, body: "Swap anyone?")["id"] as? String)

            func seen(by account: TestApp.Account) async throws -> Set<String> {
                var places = Set<String>()
                for path in ["/v1/nearby/copies?latitude=52.52&longitude=13.405", "/v1/nearby/owners?latitude=52.52&longitude=13.405",
                             "/v1/copies", "/v1/posts", "/v1/posts?latitude=52.52&longitude=13.405", "/v1/me/matches"] {
                    let rows = try await app.request(.get, path, token: account.token).jsonObject()["data"] as? [[String: Any]] ?? []
                    let names = rows.compactMap { (($0["owner"] ?? $0["user"] ?? $0["author"]) as? [String: Any])?["username"] as? String }
                    if names.contains(mallory.username) { places.insert(path) }
                }
                let pins = try await app.request(.get, "/v1/map/pins?bbox=13.3,52.4,13.5,52.6&zoom=16", token: account.token)
                    .jsonObject()["data"] as? [[String: Any]] ?? []
                if pins.count == 2 { places.insert("map") }
                for path in ["/v1/users/\(mallory.username)", "/v1/copies/\(mallorysCopy)", "/v1/posts/\(post)"]
                where try await app.request(.get, path, token: account.token).status == .ok {
                    places.insert(path)
                }
                return places
            }
            let everywhere = try await seen(by: ana)
            #expect(everywhere.count == 10, "\(everywhere.sorted())")

            let suspended = try await app.bookworm(["users", "suspend", mallory.username, "--reason", "fake listings"])
            #expect(suspended.status == 0, "\(suspended.output)")
            #expect(try await seen(by: ana).isEmpty)
            // Another process revoked the sessions: this one hears of it from PostgreSQL's
            // notification (`SessionCache`), not necessarily before the CLI exits (the clock never
            // moves, so nothing but the notification can do it).
            #expect(try await eventually(within: 30, interval: .milliseconds(5)) {
                try await app.request(.get, "/v1/me", token: mallory.token).status == .unauthorized
            })
            let login = try await app.request(.post, "/v1/auth/login", json: ["login": mallory.username, "password": mallory.password])
            #expect(try login.status == .forbidden && (login.jsonObject()["type"] as? String)?.hasSuffix("account_suspended") == true)
            let wrong = try await app.request(.post, "/v1/auth/login", json: ["login": mallory.username, "password": "not the password"])
            #expect(wrong.status == .unauthorized, "a wrong password learns nothing about the suspension")
            #expect(try await app.request(.post, "/v1/contact", json: ["to_username": mallory.username, "message": "hi", "share_email": false],
                                          token: ana.token).status == .notFound)
            let shown = try await app.bookworm(["users", "show", mallory.username])
            #expect(shown.output.contains("suspended since") && shown.output.contains("fake listings") && shown.output.contains("0 live"),
                    "\(shown.output)")

            let lifted = try await app.bookworm(["users", "unsuspend", mallory.username, "--reason", "appeal upheld"], admin: "ops-bob")
            #expect(lifted.status == 0, "\(lifted.output)")
            #expect(try await seen(by: ana) == everywhere)
            #expect(try await app.request(.post, "/v1/auth/login", json: ["login": mallory.username, "password": mallory.password]).status == .ok)

            let audit = try await app.bookworm(["audit", "list"])
            let lines = audit.output.split(separator: "\n").map(String.init)
            let host = ProcessInfo.processInfo.hostName
            #expect(lines.count == 4, "\(audit.output)")
            #expect(lines[1].contains("ops-bob") && lines[1].contains(host) && lines[1].contains("users.unsuspend")
                    && lines[1].contains("appeal upheld"))
            #expect(lines[2].contains("ops-alice") && lines[2].contains("users.show"))
            #expect(lines[3].contains("ops-alice") && lines[3].contains("users.suspend") && lines[3].contains("fake listings"))
        }
    }

    @Test func suspendingSomeoneCancelsTheTradesTheyHaveNotHandedOverAndTellsTheOtherSide() async throws {
        try await withSink { sink in
            try await withApp { app in
                let ana = try await app.registerVerified(sink), bo = try await app.registerVerified(sink)
                let mallory = try await app.registerVerified(sink)
                let mallorysCopy = try await app.copyID(mallory.token, title: "Austerlitz")
                let mallorysOffer = try await app.copyID(mallory.token, title: "Vertigo")
                let anasCopy = try await app.copyID(ana.token, title: "Beloved")
                let bosCopy = try await app.copyID(bo.token, title: "Middlemarch")
                let asked = try await app.trade(ana.token, copy: mallorysCopy)
                let swap = try await app.trade(mallory.token, copy: anasCopy, kind: "swap", offered: mallorysOffer)
                #expect(try await app.act("accept", swap, ana.token).status == .ok)
                #expect(try await app.copyRow(anasCopy).status == "reserved")
                let unrelated = try await app.trade(ana.token, copy: bosCopy)
                try await app.deliver(to: sink)
                let before = sink.messages().count

                let suspended = try await app.bookworm(["users", "suspend", mallory.username, "--reason", "no-shows"])
                #expect(suspended.status == 0 && suspended.output.contains("2 open trades cancelled"), "\(suspended.output)")
                #expect(try await app.tradeState(asked) == "cancelled")
                #expect(try await app.tradeState(swap) == "cancelled")
                #expect(try await app.tradeState(unrelated) == "requested")
                #expect(try await app.copyRow(anasCopy).status == "available", "ana's copy, reserved for the swap, is hers to trade again")
                #expect(try await app.copyRow(mallorysOffer).status == "available")

                // The CLI wrote the mails at its own (real) time, ahead of the app's manual clock by
                // however long the test has run (over 60 s in a loaded run: nothing was due then).
                app.clock.catchUp()
                try await app.deliver(to: sink)
                let told = sink.messages().dropFirst(before)
                #expect(told.count == 2 && told.allSatisfy { $0.envelopeTo == ana.email }, "\(told.map(\.envelopeTo))")
                #expect(told.allSatisfy { $0.body.contains("no longer active") && !$0.body.contains("no-shows") })
                #expect(try await app.bookworm(["users", "suspend", mallory.username]).output.contains("already suspended"))

                // A report resolved by suspension does the same.
                let bosAsk = try await app.trade(bo.token, copy: anasCopy)
                let report = try await app.report(bo.token, "user", username: ana.username)
                let reportID = try #require(try report.jsonObject()["id"] as? String)
                let resolved = try await app.bookworm(["reports", "resolve", reportID, "--action", "suspend"])
                #expect(resolved.output.contains("2 open trades cancelled"), "\(resolved.output)")
                #expect(try await app.tradeState(bosAsk) == "cancelled")
                #expect(try await app.tradeState(unrelated) == "cancelled")
            }
        }
    }

    @Test func adminCommandsRefuseWhatDoesNotExist() async throws {
        try await withApp { app in
            let unknown = try await app.bookworm(["users", "suspend", "nobody_here"])
            #expect(unknown.status == 1 && unknown.output.contains("No user named nobody_here"), "\(unknown.output)")
            let report = try await app.bookworm(["reports", "show", UUID().uuidString])
            #expect(report.status == 1 && report.output.contains("No report"), "\(report.output)")
            let usage = try await app.bookworm(["reports", "resolve", UUID().uuidString, "--action", "ban"])
            #expect(usage.status != 0 && usage.output.contains("dismiss, remove or suspend"), "\(usage.output)")
            #expect(try await app.bookworm(["audit", "list"]).output.contains("no admin actions"))
        }
    }
}
