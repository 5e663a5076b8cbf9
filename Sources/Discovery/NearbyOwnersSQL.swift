import Accounts
import BookwormCore
import Catalog
import Foundation
import PostgresNIO

/// Nearby owners: the owners of matching available copies within the radius, nearest first by
/// their nearest pin that holds one, with how many matching copies they have in the radius.
extension NearbyStore {
    /// In rounds of nearest pins, as `copiesSQL`: `near` is the `pinLimit` nearest pins with
    /// their ties, `beyond` the nearest pin left out. An owner's place in the order is their
    /// nearest pin holding a matching copy; every pin nearer than `beyond` was tried, so an owner
    /// ordered before `beyond` has their true place, and a full page ending before it is the true
    /// page (`isComplete`). Pins are not cut at the cursor: an owner shown on an earlier page must
    /// still be seen to stand before it. Matching copies are counted over all the page owners'
    /// pins in the radius, for the page only. Parameters $1–$14, as `copiesSQL`.
    static let ownersSQL = nearestPins(pinsInRadius, columns: "bookworm_distance_km($5, $6, p.public_latitude, p.public_longitude) AS distance")
        + """
            , owners AS (
                SELECT near.owner_id, min(near.chord) AS chord, min(near.distance) AS distance
                FROM near
                WHERE EXISTS (SELECT 1 FROM copies c WHERE c.pin_id = near.id AND \(matching))
                   OR (near.is_default AND EXISTS (SELECT 1 FROM copies c
                                                   WHERE c.owner_id = near.owner_id AND c.pin_id IS NULL AND \(matching)))
                GROUP BY near.owner_id
            ), page AS (
                SELECT * FROM owners
                WHERE $11::float8 IS NULL OR (chord, owner_id) > ($11, $12)
                ORDER BY chord, owner_id
                LIMIT $13
            ), meta AS (
                SELECT (SELECT chord FROM beyond) AS boundary
            )
            SELECT meta.boundary, page.chord, page.distance, u.id, u.username, u.display_name,
                   (SELECT count(*) FROM pins op CROSS JOIN LATERAL (
                        SELECT c.id FROM copies c WHERE c.pin_id = op.id AND \(matching)
                        UNION ALL
                        SELECT c.id FROM copies c WHERE op.is_default AND c.owner_id = op.owner_id AND c.pin_id IS NULL AND \(matching)
                    ) held
                    WHERE op.owner_id = page.owner_id AND bookworm_distance_km($5, $6, op.public_latitude, op.public_longitude) <= $7)
            FROM meta LEFT JOIN (page JOIN users u ON u.id = page.owner_id) ON true
            ORDER BY page.chord, u.id
            """

    /// An available copy that others may see and that matches the search ($9 words, $10 ISBN).
    private static let matching = """
        c.status = 'available' AND \(Visibility.shown("c", owner: "owner_id"))
                          AND ($9::text[] IS NULL OR c.search @@ bookworm_search_query($9))
                          AND ($10::text IS NULL OR c.book_id IN (SELECT id FROM books WHERE isbn13 = $10))
        """

    package static func ownersStatement(_ query: NearbyQuery, after: DistanceCursor?, limit: Int, pinLimit: Int) -> SQLStatement {
        SQLStatement(sql: ownersSQL, values: sphereValues(query) + [
            .double(query.origin.latitude), .double(query.origin.longitude), .double(query.radiusKm), .uuid(query.callerID),
            .textArray(query.words), .text(query.isbn13), .double(after?.distance), .uuid(after?.id), .int(limit), .int(pinLimit),
        ])
    }

    /// Rounds of 16, 128, 1,024… nearest pins (and their ties) until the page is provably
    /// complete, as for copies.
    package func owners(_ query: NearbyQuery, after: DistanceCursor?, limit: Int) async throws -> [NearbyOwner] {
        try await inRounds(limit: limit) { pinLimit in
            NearbyOwnersSQL(values: Self.ownersStatement(query, after: after, limit: limit, pinLimit: pinLimit).values)
        } row: { cells, chord in
            NearbyOwner(user: OwnerSummary(id: try cells[3].decode(UUID.self), username: try cells[4].decode(String.self),
                                           displayName: try cells[5].decode(String?.self)),
                        distanceKm: try cells[2].decode(Double.self), matchingCopies: Int(try cells[6].decode(Int64.self)), sortKey: chord)
        }
    }

    // MARK: - The statement before the rounds

    static let boxFilter = RadiusBoxes.filter(firstParameter: 4)

    /// `near`: pins within the radius that are not the caller's. `placed`: the available copies
    /// each stands for (those placed on it and, for a default pin, its owner's unplaced ones) that
    /// match the search. Only copy ids and distances flow through here; details are joined for
    /// the one page that survives the sort. Parameters $1–$14.
    static let placedSQL = """
        WITH near AS MATERIALIZED (
            SELECT p.id, p.owner_id, p.is_default, p.public_latitude, p.public_longitude,
                   bookworm_distance_km($1, $2, p.public_latitude, p.public_longitude) AS distance
            FROM pins p
            WHERE \(boxFilter)
              AND bookworm_distance_km($1, $2, p.public_latitude, p.public_longitude) <= $3
              AND p.owner_id <> $12
              AND \(BlocksStore.noBlockBetween("$12", "p.owner_id"))
              AND \(Visibility.ownerActive("p.owner_id"))
        ), wanted_book AS (
            SELECT id FROM books WHERE isbn13 = $14
        ), placed AS (
            SELECT c.id AS copy_id, c.owner_id, near.distance, near.public_latitude, near.public_longitude
            FROM near JOIN copies c ON c.pin_id = near.id
            WHERE c.status = 'available' AND c.hidden_at IS NULL
              AND ($13::text[] IS NULL OR c.search @@ bookworm_search_query($13))
              AND ($14::text IS NULL OR c.book_id IN (SELECT id FROM wanted_book))
            UNION ALL
            SELECT c.id, c.owner_id, near.distance, near.public_latitude, near.public_longitude
            FROM near JOIN copies c ON c.owner_id = near.owner_id AND c.pin_id IS NULL
            WHERE near.is_default AND c.status = 'available' AND c.hidden_at IS NULL
              AND ($13::text[] IS NULL OR c.search @@ bookworm_search_query($13))
              AND ($14::text IS NULL OR c.book_id IN (SELECT id FROM wanted_book))
        )
        """

    static func placedValues(_ query: NearbyQuery) -> [SQLValue] {
        [.double(query.origin.latitude), .double(query.origin.longitude), .double(query.radiusKm)]
            + RadiusBoxes.values(around: query.origin, radiusKm: query.radiusKm)
            + [.uuid(query.callerID), .textArray(query.words), .text(query.isbn13)]
    }

    /// Every owner with a matching copy in the radius, nearest first: what `owners` replaced
    /// (every pin in the radius, all their copies grouped), kept as the tests' and the
    /// benchmark's reference for the same answers. Unpaged: (owner, distance, matching copies).
    package static func ownersInRadiusStatement(_ query: NearbyQuery) -> SQLStatement {
        SQLStatement(sql: placedSQL + """
            , owners AS (
                SELECT owner_id, min(distance) AS distance, count(*) AS matching FROM placed GROUP BY owner_id
            )
            SELECT owner_id, distance, matching::int8 FROM owners ORDER BY distance, owner_id
            """, values: placedValues(query))
    }
}

/// `NearbyStore.ownersSQL`, prepared, as `NearbyCopiesSQL`.
package struct NearbyOwnersSQL: PreparedSQL {
    package static let sql = NearbyStore.ownersSQL
    package let values: [SQLValue]

    package init(values: [SQLValue]) { self.values = values }
}
