import Accounts
import BookwormCore
import Catalog
import Foundation
import PostgresNIO

/// Nearby owners: the owners of matching available copies within the radius, nearest first by
/// their nearest pin that holds one, with how many matching copies they have in the radius.
extension NearbyStore {
    /// Whether a page of owners may be missing rows (copies use a sentinel row instead, see
    /// `copiesSQL`): only when it is short and `nearest` may have stopped inside the radius. A
    /// full page is the true page, since every pin left out is farther than every pin in. For a
    /// short page (the `CASE` looks only then) it asks whether the
    /// `$14`-th pin from the cursor on, of all pins, lies within the radius's chord: an
    /// index-only walk, where counting `near` again read the pins, their owners and blocks a
    /// second time (a quarter of a millisecond in an empty place). Of all pins, not `near`'s,
    /// so it may say yes when the round was whole (a round more), never no when it was not.
    /// Where even the nearest pin lies outside the radius (a search far from anyone), one
    /// index entry answers instead of `$14`: 9 % of such a page.
    /// `$5`, `$6`, `$9` and `$10` are named so that every shape takes the same parameters.
    static let more = """
            , meta AS (
                SELECT CASE WHEN (SELECT count(*) FROM page) >= $13 THEN false
                            WHEN NOT coalesce((SELECT \(chord) FROM pins p WHERE $11::float8 IS NULL OR \(chord) >= $11
                                               ORDER BY \(chord) LIMIT 1) <= $4, false) THEN false
                            ELSE coalesce((SELECT \(chord) FROM pins p WHERE $11::float8 IS NULL OR \(chord) >= $11
                                           ORDER BY \(chord) OFFSET $14 - 1 LIMIT 1) <= $4, false) END AS more,
                       $5::float8 AS latitude, $6::float8 AS longitude, $9::text[] AS words, $10::text AS isbn
            )
        """

    /// As `copiesSQL`, and as a skilled PostGIS user writes it: `near`'s pins nearest first,
    /// each kept where it holds a matching copy and no nearer pin of the same owner does (so an
    /// owner comes once, at their nearest holding pin, and an owner placed before the cursor
    /// never comes again), sorted by (chord, owner) incrementally to the page. Matching copies
    /// are counted over all the page owners' pins in the radius, for the page only. Parameters
    /// $1–$14, as `copiesSQL`; as there, the unfiltered shape reads copies from the
    /// `*_shown_idx` partial indexes alone, so a crowded cell centre costs index entries.
    static func ownersSQL(filtered: Bool) -> String {
        let matching = matching(filtered: filtered)
        return nearestPins(ranked: false) + """
            , page AS (
                SELECT near.owner_id, near.chord, near.distance
                FROM near
                WHERE (\(holds("near", matching)))
                  AND NOT EXISTS (SELECT 1 FROM pins o
                                  WHERE o.owner_id = near.owner_id AND (o.public_xyz <-> \(origin), o.id) < (near.chord, near.id)
                                    AND (\(holds("o", matching))))
                  AND ($11::float8 IS NULL OR (near.chord, near.owner_id) > ($11, $12))
                ORDER BY near.chord, near.owner_id
                LIMIT $13
            )
            """ + more + """

            SELECT meta.more, page.chord, page.distance, u.id, u.username, u.display_name,
                   (SELECT count(*) FROM pins op CROSS JOIN LATERAL (
                        SELECT c.id FROM copies c WHERE c.pin_id = op.id AND \(matching)
                        UNION ALL
                        SELECT c.id FROM copies c WHERE op.is_default AND c.owner_id = op.owner_id AND c.pin_id IS NULL AND \(matching)
                    ) held
                    WHERE op.owner_id = page.owner_id AND op.public_xyz <-> \(origin) <= $4
                      AND \(NearbyStore.chordKm("(op.public_xyz <-> \(origin))")) <= $7)
            FROM meta LEFT JOIN (page JOIN users u ON u.id = page.owner_id) ON true
            ORDER BY page.chord, u.id
            """
    }

    /// SQL: `pin` holds a matching copy, its own or, as its owner's default pin, an unplaced one.
    private static func holds(_ pin: String, _ matching: String) -> String {
        """
        EXISTS (SELECT 1 FROM copies c WHERE c.pin_id = \(pin).id AND \(matching))
                         OR (\(pin).is_default AND EXISTS (SELECT 1 FROM copies c
                                                         WHERE c.owner_id = \(pin).owner_id AND c.pin_id IS NULL AND \(matching)))
        """
    }

    /// An available copy that others may see and, filtered, that matches the search ($9 words,
    /// $10 ISBN).
    private static func matching(filtered: Bool) -> String {
        let shown = "c.status = 'available' AND \(Visibility.shown("c", owner: "owner_id"))"
        guard filtered else { return shown }
        return shown + """

                          AND ($9::text[] IS NULL OR c.search @@ bookworm_search_query($9))
                          AND ($10::text IS NULL OR c.book_id IN (SELECT id FROM books WHERE isbn13 = $10))
            """
    }

    /// In rounds of nearest pins, as copies.
    package func owners(_ query: NearbyQuery, after: DistanceCursor?, limit: Int) async throws -> [NearbyOwner] {
        let values = { (pinLimit: Int) in Self.roundValues(query, after: after, limit: limit, pinLimit: pinLimit) }
        if query.isFiltered {
            return try await inRounds(limit: limit, firstRound: Self.firstOwnersPinLimit(limit: limit),
                                      statement: { NearbyFilteredOwnersSQL(values: values($0)) }, row: Self.owner)
        }
        return try await inRounds(limit: limit, firstRound: Self.firstOwnersPinLimit(limit: limit),
                                  statement: { NearbyOwnersSQL(values: values($0)) }, row: Self.owner)
    }

    /// The rest of a row of `ownersSQL`, in the order of its `SELECT`.
    static func owner(_ cells: inout RowCells, chord: Double) throws -> NearbyOwner {
        let distance = try cells.next(Double.self)
        return NearbyOwner(user: OwnerSummary(id: try cells.next(UUID.self), username: try cells.next(String.self),
                                              displayName: try cells.next(String?.self)),
                           distanceKm: distance, matchingCopies: Int(try cells.next(Int64.self)), sortKey: chord)
    }
}

/// `NearbyStore.ownersSQL`, prepared, as `NearbyCopiesSQL`: without words or ISBN.
package struct NearbyOwnersSQL: PreparedSQL {
    package static let name = "bookworm_nearby_owners"
    package static let sql = NearbyStore.ownersSQL(filtered: false)
    package let values: [SQLValue]

    package init(values: [SQLValue]) { self.values = values }
}

/// `NearbyStore.ownersSQL` for a request with words or an ISBN, prepared.
package struct NearbyFilteredOwnersSQL: PreparedSQL {
    package static let name = "bookworm_nearby_owners_filtered"
    package static let sql = NearbyStore.ownersSQL(filtered: true)
    package let values: [SQLValue]

    package init(values: [SQLValue]) { self.values = values }
}
