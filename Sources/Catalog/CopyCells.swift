import BookwormCore
import Foundation
import Places
import PostgresNIO

/// A copy's `CopiesStore.columns` as PostgreSQL sent them, from column `first` of a row: for a
/// page that only passes copies through, written to JSON from their bytes (`write(to:nearby:)`)
/// without a `CopyView` in between: decoding 50 copies' cells into strings, arrays and views and
/// writing those took 123 µs on one thread, writing the cells 66 (`NearbyRowsJSON` in the
/// nearby benchmark; see README, the HTTP layer). `view()` decodes, for everything else.
package struct CopyCells: Sendable {
    let cells: PostgresRandomAccessRow
    let first: Int

    package init(_ cells: PostgresRandomAccessRow, from first: Int) {
        self.cells = cells
        self.first = first
    }

    /// Decoded when asked: a page needs only its last copy's, for the cursor.
    package var id: UUID {
        get throws { try cells.uuid(first) }
    }

    package func view() throws -> CopyView {
        CopiesStore.view(try CopiesStore.row(cells, from: first))
    }

    /// What `CopyView.write(to:nearby:)` writes for `view()`, keys in the same sorted order.
    package func write(to json: inout JSONWriter, nearby: (distanceKm: Double, place: PublicPlace)?) throws {
        let at = first
        try json.object { json in
            json.key("book")
            try json.object { json in
                json.key("authors"); try json.textArray(cells, at + 12)
                json.key("id"); try json.uuid(cells, at + 9)
                json.key("isbn13"); try json.text(cells, at + 10)
                json.key("title"); try json.text(cells, at + 11)
            }
            json.key("condition"); try json.text(cells, at + 1)
            json.key("created_at"); try json.date(cells, at + 6)
            if let nearby { json.key("distance_km"); json.number(nearby.distanceKm) }
            json.key("id"); try json.uuid(cells, at)
            json.key("notes"); try json.text(cells, at + 3)
            json.key("owner")
            try json.object { json in
                json.key("display_name"); try json.text(cells, at + 15)
                json.key("id"); try json.uuid(cells, at + 13)
                json.key("username"); try json.text(cells, at + 14)
            }
            json.key("photo_url"); try json.text(cells, at + 5, prefix: "/v1/photos/")
            if let nearby { nearby.place.writePin(to: &json) }
            json.key("pin_id"); try json.uuid(cells, at + 4)
            json.key("status"); try json.text(cells, at + 2)
            json.key("updated_at"); try json.date(cells, at + 7)
        }
    }
}
