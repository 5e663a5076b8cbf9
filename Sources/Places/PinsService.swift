import Accounts
import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// The pin use cases. Every change locks all of the owner's pins first, so "at most
/// `maxPinsPerUser`" and "exactly one default while the user has pins" hold however requests
/// interleave.
package struct PinsService: Sendable {
    let client: Database
    let pins: PinsStore
    let logger: Logger

    package init(client: Database, logger: Logger) {
        self.client = client
        self.pins = PinsStore(client: client, logger: logger)
        self.logger = logger
    }

    package func list(owner: UUID) async throws -> [OwnedPin] {
        try await pins.list(ownerID: owner)
    }

    /// The first pin becomes the default whatever the caller asked.
    /// With a client-made `id` of one of the owner's pins: that pin when its label, kind and point
    /// are the same, else `ClientMadeID.conflict`.
    package func create(id clientID: UUID? = nil, owner: UUID, label: String, kind: PinKind, point: GeoPoint, makeDefault: Bool)
        async throws -> Made<OwnedPin>
    {
        let made = try await client.transaction(logger: logger) { connection -> Made<OwnedPin>? in
            let existing = try await pins.lockAll(ownerID: owner, on: connection)
            if let clientID, let mine = existing.first(where: { $0.id == clientID }) {
                guard mine.label == label, mine.kind == kind.rawValue, mine.exact == point else { throw ClientMadeID.conflict }
                return Made(mine, isNew: false)
            }
            guard existing.count < PlacesValidation.maxPinsPerUser else {
                throw AppError.conflict(code: "too-many-pins", detail: "At most \(PlacesValidation.maxPinsPerUser) pins per user", field: nil)
            }
            let id = try await pins.insert(id: clientID, ownerID: owner, label: label, kind: kind, exact: point, isDefault: false,
                                           on: connection)
            if existing.isEmpty || makeDefault { try await pins.makeDefault(id, ownerID: owner, on: connection) }
            return try await pins.list(ownerID: owner, on: connection).first { $0.id == id }.map { Made($0, isNew: true) }
        }
        guard let made else { throw AppError.unavailable("the new pin vanished") }
        return made
    }

    /// An imported pin (a Bookworm export's): the one made from `key` before, or a new one. Under
    /// the same lock as `create`, so the limit and the single default hold; a second import of
    /// the same file finds its pins again.
    package func importPin(owner: UUID, key: String, label: String, kind: PinKind, point: GeoPoint, makeDefault: Bool) async throws -> UUID {
        try await client.transaction(logger: logger) { connection in
            let existing = try await pins.lockAll(ownerID: owner, on: connection)
            if let id = try await pins.imported(key, ownerID: owner, on: connection) { return id }
            guard existing.count < PlacesValidation.maxPinsPerUser else {
                throw AppError.conflict(code: "too-many-pins", detail: "At most \(PlacesValidation.maxPinsPerUser) pins per user", field: nil)
            }
            let id = try await pins.insert(ownerID: owner, label: label, kind: kind, exact: point, isDefault: false, on: connection)
            try await pins.setImportKey(key, of: id, on: connection)
            if existing.isEmpty || makeDefault { try await pins.makeDefault(id, ownerID: owner, on: connection) }
            return id
        }
    }

    /// Fields left nil keep their value. Giving up the default hands it to the oldest other
    /// pin; the only pin must stay the default.
    package func update(owner: UUID, id: UUID, label: String?, kind: PinKind?, latitude: Double?, longitude: Double?,
                        isDefault: Bool?) async throws -> OwnedPin {
        let pin = try await client.transaction(logger: logger) { connection in
            let mine = try await pins.lockAll(ownerID: owner, on: connection)
            let current = try await owned(id, among: mine, connection: connection)
            let point = try PlacesValidation.point(latitude: latitude ?? current.exact.latitude,
                                                   longitude: longitude ?? current.exact.longitude)
            let kind = kind ?? PinKind(rawValue: current.kind) ?? .home
            try await pins.update(id, label: label ?? current.label, kind: kind, exact: point, on: connection)
            switch isDefault {
            case true?: try await pins.makeDefault(id, ownerID: owner, on: connection)
            case false? where current.isDefault:
                guard let successor = mine.first(where: { $0.id != id }) else {
                    throw AppError.unprocessable("is_default: your only pin must stay your default")
                }
                try await pins.makeDefault(successor.id, ownerID: owner, on: connection)
            default: break
            }
            return try await pins.list(ownerID: owner, on: connection).first { $0.id == id }
        }
        guard let pin else { throw AppError.notFound("No pin with id \(id.apiString)") }
        return pin
    }

    /// Deleting the default promotes the oldest remaining pin; copies on it fall back to the
    /// owner's default (their `pin_id` becomes null).
    package func delete(owner: UUID, id: UUID) async throws {
        try await client.transaction(logger: logger) { connection in
            let mine = try await pins.lockAll(ownerID: owner, on: connection)
            let current = try await owned(id, among: mine, connection: connection)
            try await pins.delete(id, on: connection)
            if current.isDefault, let successor = mine.first(where: { $0.id != id }) {
                try await pins.makeDefault(successor.id, ownerID: owner, on: connection)
            }
        }
    }

    /// The pin if it is the caller's; 403 if it is someone else's, 404 if it does not exist.
    private func owned(_ id: UUID, among mine: [OwnedPin], connection: PostgresConnection) async throws -> OwnedPin {
        if let pin = mine.first(where: { $0.id == id }) { return pin }
        if try await pins.exists(id, on: connection) { throw AppError.forbidden("This pin belongs to someone else") }
        throw AppError.notFound("No pin with id \(id.apiString)")
    }
}
