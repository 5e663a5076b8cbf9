import Foundation
import HTTPTypes
import Hummingbird
import PostgresNIO

/// `/v1/me/pins` (API.md, Places): owner only, exactly one default while the user has pins.
struct PinsRoutes: Sendable {
    let client: PostgresClient
    let pins: PinsStore

    func addRoutes(authenticated: RouterGroup<AppRequestContext>) {
        authenticated.post("me/pins", use: create)
        authenticated.get("me/pins", use: list)
        authenticated.patch("me/pins/:id", use: update)
        authenticated.delete("me/pins/:id", use: delete)
    }

    @Sendable func list(_ request: Request, context: AppRequestContext) async throws -> Response {
        let mine = try await pins.list(ownerID: context.requireSession().user.id)
        return try .json(Page(data: mine, nextCursor: nil), for: request)
    }

    @Sendable func create(_ request: Request, context: AppRequestContext) async throws -> Response {
        let owner = try context.requireSession().user.id
        var request = request
        let body = try await request.decodeStrict(CreatePinBody.self, context: context)
        var errors: [FieldError] = []
        let label = collectFieldErrors(&errors) { try PlacesValidation.label(body.label) }
        let kind = collectFieldErrors(&errors) { try PlacesValidation.kind(body.kind) }
        let point = collectFieldErrors(&errors) { try PlacesValidation.point(latitude: body.latitude, longitude: body.longitude) }
        guard errors.isEmpty, let label, let kind, let point else { throw AppError.validation(errors) }
        let pin = try await client.transaction(logger: context.logger) { connection in
            let existing = try await pins.lockAll(ownerID: owner, on: connection)
            guard existing.count < PlacesValidation.maxPinsPerUser else {
                throw AppError.conflict(code: "too-many-pins", detail: "At most \(PlacesValidation.maxPinsPerUser) pins per user", field: nil)
            }
            let id = try await pins.insert(ownerID: owner, label: label, kind: kind, exact: point, isDefault: false, on: connection)
            if existing.isEmpty || body.isDefault == true { try await pins.makeDefault(id, ownerID: owner, on: connection) }
            return try await pins.list(ownerID: owner, on: connection).first { $0.id == id }
        }
        guard let pin else { throw AppError.unavailable("the new pin vanished") }
        return try .json(pin, status: .created, for: request)
    }

    @Sendable func update(_ request: Request, context: AppRequestContext) async throws -> Response {
        let owner = try context.requireSession().user.id
        let id = try context.parameters.uuid("id")
        var request = request
        let body = try await request.decodeStrict(UpdatePinBody.self, context: context)
        let newLabel = try body.label.map(PlacesValidation.label)
        let newKind = try body.kind.map(PlacesValidation.kind)
        let pin = try await client.transaction(logger: context.logger) { connection in
            let mine = try await pins.lockAll(ownerID: owner, on: connection)
            let current = try await owned(id, among: mine, connection: connection)
            let point = try PlacesValidation.point(latitude: body.latitude ?? current.exact.latitude,
                                                   longitude: body.longitude ?? current.exact.longitude)
            let kind = newKind ?? PinKind(rawValue: current.kind) ?? .home
            try await pins.update(id, label: newLabel ?? current.label, kind: kind, exact: point, on: connection)
            switch body.isDefault {
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
        return try .json(pin, for: request)
    }

    /// Deleting the default promotes the oldest remaining pin; copies on it fall back to the
    /// owner's default (their `pin_id` becomes null).
    @Sendable func delete(_ request: Request, context: AppRequestContext) async throws -> Response {
        let owner = try context.requireSession().user.id
        let id = try context.parameters.uuid("id")
        try await client.transaction(logger: context.logger) { connection in
            let mine = try await pins.lockAll(ownerID: owner, on: connection)
            let current = try await owned(id, among: mine, connection: connection)
            try await pins.delete(id, on: connection)
            if current.isDefault, let successor = mine.first(where: { $0.id != id }) {
                try await pins.makeDefault(successor.id, ownerID: owner, on: connection)
            }
        }
        return .noContent()
    }

    /// The pin if it is the caller's; 403 if it is someone else's, 404 if it does not exist.
    private func owned(_ id: UUID, among mine: [OwnedPin], connection: PostgresConnection) async throws -> OwnedPin {
        if let pin = mine.first(where: { $0.id == id }) { return pin }
        if try await pins.exists(id, on: connection) { throw AppError.forbidden("This pin belongs to someone else") }
        throw AppError.notFound("No pin with id \(id.apiString)")
    }
}
