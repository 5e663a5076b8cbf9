import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Exchange
@testable import BookwormTestSupport

@Suite struct ContactTests {
    @Test func contactAboutACopyReachesTheOwnerWithoutTellingTheSenderTheirAddress() async throws {
        try await withSink { sink in
            try await withApp(configure: { $0.mail.from = "Bookworm <hello@books.example.org>" }) { app in
                let owner = try await app.registerVerified(sink)
                let sender = try await app.registerVerified(sink)
                let copy = try await app.addCopy(owner.token, title: "Le Petit Prince")
                let copyID = try #require(copy["id"] as? String)
                let hidden = try await app.request(.post, "/v1/contact",
                                                   json: ["copy_id": copyID, "message": "Is it still there?", "share_email": false],
                                                   token: sender.token)
                #expect(hidden.status == .accepted)
                #expect(try hidden.jsonObject()["status"] as? String == "queued")
                let shared = try await app.request(.post, "/v1/contact",
                                                   json: ["to_username": owner.username, "message": "Or reply to me directly", "share_email": true],
                                                   token: sender.token)
                #expect(shared.status == .accepted)
                try await app.deliver(to: sink)
                let mails = sink.messages().filter { $0.envelopeTo == owner.email && $0.header("Subject")?.contains(sender.username) == true }
                #expect(mails.count == 2)
                let first = try #require(mails.first)
                #expect(first.header("From") == "Bookworm <hello@books.example.org>")
                #expect(first.header("Reply-To") == nil)
                #expect(first.decodedHeader("Subject")?.contains("Le Petit Prince") == true)
                #expect(first.body.contains(sender.username) && first.body.contains("Is it still there?"))
                #expect(!first.raw.contains(sender.email))
                #expect(mails.last?.header("Reply-To") == sender.email)

                // Nothing the sender can read carries the recipient's address.
                let list = try await app.request(.get, "/v1/me/contacts", token: sender.token)
                let rows = try #require(try list.jsonObject()["data"] as? [[String: Any]])
                #expect(rows.count == 2)
                #expect(rows.allSatisfy { $0["status"] as? String == "sent" })
                #expect((rows.last?["to"] as? [String: Any])?["username"] as? String == owner.username)
                #expect(rows.last?["book_title"] as? String == "Le Petit Prince")
                for text in [String(buffer: hidden.body), String(buffer: shared.body), String(buffer: list.body)] {
                    #expect(!text.contains(owner.email))
                }
            }
        }
    }

    @Test func contactNeedsAVerifiedSenderAndRecipientAndRespectsBlocks() async throws {
        try await withSink { sink in
            try await withApp { app in
                let owner = try await app.registerVerified(sink)
                let unverified = try await app.register()
                let sender = try await app.registerVerified(sink)
                let body: [String: any Sendable] = ["to_username": owner.username, "message": "hi", "share_email": false]
                let notVerified = try await app.request(.post, "/v1/contact", json: body, token: unverified.token)
                #expect(notVerified.status == .forbidden)
                #expect(try notVerified.jsonObject()["type"] as? String == "https://bookworm.example/problems/email-not-verified")
                let toUnverified = try await app.request(.post, "/v1/contact",
                                                         json: ["to_username": unverified.username, "message": "hi", "share_email": false],
                                                         token: sender.token)
                #expect(toUnverified.status == .unprocessableContent)
                #expect(try await app.request(.put, "/v1/users/\(sender.username)/block", token: owner.token).status == .noContent)
                let blocked = try await app.request(.post, "/v1/contact", json: body, token: sender.token)
                #expect(blocked.status == .forbidden)
                #expect(try await app.request(.delete, "/v1/users/\(sender.username)/block", token: owner.token).status == .noContent)
                #expect(try await app.request(.post, "/v1/contact", json: body, token: sender.token).status == .accepted)

                let invalid: [([String: any Sendable], String)] = [
                    (["message": "hi", "share_email": false], "to_username"),
                    (["to_username": owner.username, "copy_id": UUID().uuidString, "message": "hi", "share_email": false], "to_username"),
                    (["to_username": owner.username, "message": "  ", "share_email": false], "message"),
                    (["to_username": owner.username, "message": "hi"], "share_email"),
                    (["to_username": owner.username, "message": "hi", "share_email": false, "cc": "x"], "cc"),
                ]
                for (json, field) in invalid {
                    let response = try await app.request(.post, "/v1/contact", json: json, token: sender.token)
                    // Exactly-one-of is a rule (422); the rest break the schema (400).
                    #expect([.badRequest, .unprocessableContent].contains(response.status), "\(json)")
                    #expect(try response.problemFields().contains(field), "\(json): \(String(buffer: response.body))")
                }
                let missing = try await app.request(.post, "/v1/contact", json: ["copy_id": UUID().uuidString, "message": "hi", "share_email": false],
                                                    token: sender.token)
                #expect(missing.status == .notFound)
                let me = try await app.request(.post, "/v1/contact", json: ["to_username": sender.username, "message": "hi", "share_email": false],
                                               token: sender.token)
                #expect(me.status == .unprocessableContent)
            }
        }
    }

    @Test func contactIsThrottledPerRecipientPerDayAndPerSenderPerHour() async throws {
        try await withSink { sink in
            try await withApp(configure: { $0.contact = ContactPolicy(perHour: 3, perRecipientPerDay: 2) }) { app in
                let alice = try await app.registerVerified(sink)
                let bob = try await app.registerVerified(sink)
                let sender = try await app.registerVerified(sink)
                func contact(_ to: String) async throws -> TestResponse {
                    try await app.request(.post, "/v1/contact", json: ["to_username": to, "message": "hello \(UUID())", "share_email": false],
                                          token: sender.token)
                }
                #expect(try await contact(alice.username).status == .accepted)
                #expect(try await contact(alice.username).status == .accepted)
                let perRecipient = try await contact(alice.username)
                #expect(perRecipient.status == .tooManyRequests)
                #expect(Int(perRecipient.headers[.retryAfter] ?? "") ?? 0 > 80_000)
                #expect(try await contact(bob.username).status == .accepted)
                let perHour = try await contact(bob.username)
                #expect(perHour.status == .tooManyRequests)
                #expect(Int(perHour.headers[.retryAfter] ?? "") ?? 0 <= 3600)
                var contactRows = 0
                for try await count in try await app.db.query("SELECT count(*)::int8 FROM contact_requests").decode(Int.self) { contactRows = count }
                #expect(contactRows == 3)
            }
        }
    }
}
