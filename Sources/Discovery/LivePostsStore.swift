import Accounts
import BookwormCore
import Foundation
import Logging
import Places
import PostgresNIO

/// A new post as the live nearby feeds send it: its feed view and the public point it is at.
package struct LivePost: Sendable {
    let view: PostView
    package let authorID: UUID
    let point: GeoPoint

    /// The post as a viewer at `origin` reads it in the nearby feed, when it lies within
    /// `radiusKm`, and the distance it shows (between public points, rounded as the feed rounds it).
    package func seen(from origin: GeoPoint, radiusKm: Double) -> (shownKm: Double, view: PostView)? {
        let distance = Geo.distanceKm(origin, point)
        guard distance <= radiusKm else { return nil }
        return (Nearby.rounded(distance),
                PostView(id: view.id, kind: view.kind, body: view.body, author: view.author, book: view.book, copyID: view.copyID,
                         createdAt: view.createdAt, distanceKm: distance, createdMicros: view.createdMicros))
    }
}

/// SQL for `GET /v1/posts/live`: the new posts others may see, who of the viewers may see
/// each, and where the ordinary feed takes over.
package struct LivePostsStore: Sendable {
    let client: Database
    let logger: Logger

    package init(client: Database, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Those of `ids` that the nearby feed shows to anyone: placed, not hidden, author active.
    package func shown(_ ids: [UUID]) async throws -> [LivePost] {
        guard !ids.isEmpty else { return [] }
        let rows = try await client.query("""
            SELECT \(unescaped: PostsStore.columns), po.author_id, po.public_latitude, po.public_longitude
            \(unescaped: PostsStore.joins)
            WHERE po.id = ANY(\(ids)) AND po.cell IS NOT NULL AND \(unescaped: Visibility.shown("po", owner: "author_id"))
            ORDER BY po.created_at, po.id
            """, logger: logger)
        var posts: [LivePost] = []
        for try await row in rows {
            var cells = RowCells(row)
            let post = try PostsStore.row(&cells)
            posts.append(LivePost(view: PostsStore.view(post), authorID: try cells.next(UUID.self),
                                  point: GeoPoint(latitude: try cells.next(Double.self), longitude: try cells.next(Double.self))))
            try cells.end()
        }
        return posts
    }

    /// Those of `viewers` with a block between them and `author`, either way.
    package func blocked(author: UUID, viewers: [UUID]) async throws -> Set<UUID> {
        guard !viewers.isEmpty else { return [] }
        let rows = try await client.query("""
            SELECT blocked_id FROM blocks WHERE blocker_id = \(author) AND blocked_id = ANY(\(viewers))
            UNION SELECT blocker_id FROM blocks WHERE blocked_id = \(author) AND blocker_id = ANY(\(viewers))
            """, logger: logger)
        var blocked: Set<UUID> = []
        for try await id in rows.decode(UUID.self) { blocked.insert(id) }
        return blocked
    }

    /// A feed cursor just above every post committed so far (the database's clock, which
    /// stamps posts): `GET /v1/posts?cursor=` from it pages what was there before the stream.
    package func cursorAboveNow() async throws -> Cursor {
        let rows = try await client.query("SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::int8 + 1", logger: logger)
        guard let micros = try rows.rows.first?.decode(Int64.self) else { throw AppError.unavailable("no database clock") }
        return Cursor(micros: micros, id: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
    }
}
