import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Catalog
@testable import BookwormApp
@testable import BookwormTestSupport

@Suite struct SeedTests {
    @Test func seedCreatesValidUsersBooksAndCopies() async throws {
        try await withTestDatabase { _, client in
            try await Seeder(client: .forAdministration(client), logger: Logger(label: "seed")).run(.init(users: 12, books: 30, copies: 7000, posts: 6000))
            var counts: [Int] = []
            for table in ["users", "books", "copies"] {
                for try await count in try await client.query(PostgresQuery(unsafeSQL: "SELECT count(*)::int8 FROM \(table)")).decode(Int.self) {
                    counts.append(count)
                }
            }
            #expect(counts == [12, 30, 7000])
            // Demo copies queue no alert fan-out.
            for try await jobs in try await client.query("SELECT count(*)::int8 FROM jobs WHERE kind = 'alerts.copy'").decode(Int.self) {
                #expect(jobs == 0)
            }
            for try await isbn in try await client.query("SELECT isbn13 FROM books").decode(String.self) {
                #expect((try? ISBN(isbn))?.isbn13 == isbn)
            }
            let pins = try await client.query("""
                SELECT count(*)::int8, count(*) FILTER (WHERE is_default)::int8, max(n)::int8 FROM (
                    SELECT owner_id, count(*) AS n, bool_or(is_default) AS is_default FROM pins GROUP BY owner_id) per_user
                """)
            for try await (users, withDefault, most) in pins.decode((Int, Int, Int).self) {
                #expect(users == 12)
                #expect(withDefault == 12)
                #expect(most <= 2)
            }
            // Posts sit on their author's default pin, newest last in the table as in production.
            let posts = try await client.query("""
                SELECT count(*)::int8, count(*) FILTER (WHERE pin.is_default AND pin.owner_id = po.author_id)::int8,
                       count(DISTINCT po.kind)::int8, count(po.book_id)::int8
                FROM posts po JOIN pins pin ON pin.id = po.pin_id
                """)
            for try await (total, onDefault, kinds, withBook) in posts.decode((Int, Int, Int, Int).self) {
                #expect(total == 6000 && onDefault == 6000 && kinds == 2)
                #expect(withBook > 2000 && withBook < 4000)
            }
            let spread = try await client.query("SELECT count(DISTINCT owner_id)::int8, count(DISTINCT book_id)::int8 FROM copies")
            for try await (owners, books) in spread.decode((Int, Int).self) {
                #expect(owners == 12)
                #expect(books > 20)
            }
        }
    }

    @Test func seededUsersCanSignInWithTheDemoPassword() async throws {
        try await withApp { app in
            try await Seeder(client: app.db, logger: Logger(label: "seed")).run(.init(users: 2, books: 1, copies: 1))
            var username = ""
            for try await name in try await app.db.query("SELECT username FROM users LIMIT 1").decode(String.self) { username = name }
            let login = try await app.request(.post, "/v1/auth/login", json: ["login": username, "password": Seeder.demoPassword])
            #expect(login.status == .ok)
        }
    }
}
