import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

@Suite struct BlocksTests {
    /// A block hides each from the other in nearby results, the library and the feed, both
    /// ways; unblocking brings everything back. Others still see both.
    @Test func blockingHidesEachFromTheOthersResultsBothWays() async throws {
        try await withApp { app in
            let alice = try await app.register()
            let mallory = try await app.register()
            let carol = try await app.register()
            for account in [alice, mallory, carol] { try await app.addPin(account.token, kind: "meetup") }
            _ = try await app.addCopy(alice.token, title: "Alice's book")
            _ = try await app.addCopy(mallory.token, title: "Mallory's book")
            try await app.addPost(alice.token, body: "alice posts")
            try await app.addPost(mallory.token, body: "mallory posts")

            func visible(to account: TestApp.Account) async throws -> Set<String> {
                var owners = Set<String>()
                for path in ["/v1/nearby/copies?latitude=52.52&longitude=13.405", "/v1/nearby/owners?latitude=52.52&longitude=13.405"] {
                    let rows = try await app.request(.get, path, token: account.token).jsonObject()["data"] as? [[String: Any]] ?? []
                    owners.formUnion(rows.compactMap { (($0["owner"] ?? $0["user"]) as? [String: Any])?["username"] as? String }.map { "nearby:\($0)" })
                }
                let library = try await app.request(.get, "/v1/copies", token: account.token).jsonObject()["data"] as? [[String: Any]] ?? []
                owners.formUnion(library.compactMap { ($0["owner"] as? [String: Any])?["username"] as? String }.map { "library:\($0)" })
                for path in ["/v1/posts", "/v1/posts?latitude=52.52&longitude=13.405"] {
                    let posts = try await app.request(.get, path, token: account.token).jsonObject()["data"] as? [[String: Any]] ?? []
                    owners.formUnion(posts.compactMap { ($0["author"] as? [String: Any])?["username"] as? String }.map { "feed:\($0)" })
                }
                return owners
            }
            let all = ["nearby:", "library:", "feed:"]
            #expect(try await visible(to: alice).isSuperset(of: all.map { $0 + mallory.username }))

            #expect(try await app.request(.put, "/v1/users/\(mallory.username)/block", token: alice.token).status == .noContent)
            #expect(try await app.request(.put, "/v1/users/\(mallory.username)/block", token: alice.token).status == .noContent)
            let aliceSees = try await visible(to: alice)
            let mallorySees = try await visible(to: mallory)
            for place in all {
                #expect(!aliceSees.contains(place + mallory.username), "\(place)")
                #expect(!mallorySees.contains(place + alice.username), "\(place)")
            }
            let carolSees = try await visible(to: carol)
            #expect(carolSees.isSuperset(of: all.map { $0 + mallory.username } + all.map { $0 + alice.username }))

            #expect(try await app.request(.delete, "/v1/users/\(mallory.username)/block", token: alice.token).status == .noContent)
            #expect(try await visible(to: mallory).isSuperset(of: all.map { $0 + alice.username }))
        }
    }

    @Test func blockingNeedsAnAccountAndAnotherExistingUser() async throws {
        try await withApp { app in
            let alice = try await app.register()
            #expect(try await app.request(.put, "/v1/users/\(alice.username)/block").status == .unauthorized)
            #expect(try await app.request(.put, "/v1/users/\(alice.username)/block", token: alice.token).status == .unprocessableContent)
            #expect(try await app.request(.put, "/v1/users/nobody_at_all/block", token: alice.token).status == .notFound)
            #expect(try await app.request(.delete, "/v1/users/nobody_at_all/block", token: alice.token).status == .notFound)
        }
    }
}
