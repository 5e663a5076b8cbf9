import Foundation

/// The `id` a client may give an object it creates (copies, pins, posts, wishes; API.md, "Safe
/// retries"), so that an offline queue replayed makes each object once: a UUID of version 4
/// or 7. Creating an id that exists answers the object when it is the caller's with the same
/// content, else `conflict`, which says nothing of the other object.
package enum ClientMadeID {
    package static func checked(_ id: UUID?) throws -> UUID? {
        guard let id else { return nil }
        let version = id.uuid.6 >> 4
        guard version == 4 || version == 7, id.uuid.8 & 0xC0 == 0x80 else {
            throw AppError.invalid("id", "must be a UUID of version 4 or 7 (RFC 9562)")
        }
        return id
    }

    package static let conflict = AppError.conflict(
        code: "id_conflict", detail: "Another object has this id: choose a new id for a new object", field: "id")

    /// The insert met a row with the id that a transaction committed after this one's check
    /// (two creates of one object at once): the transaction runs again (`TransactionConflict`),
    /// and its check then answers the object, or `conflict`.
    package struct Raced: Error {
        package init() {}
    }
}

/// What a create made: a new object, or the one a client-made id already names.
package struct Made<View: Sendable>: Sendable {
    package let view: View
    package let isNew: Bool

    package init(_ view: View, isNew: Bool) {
        self.view = view
        self.isNew = isNew
    }
}
