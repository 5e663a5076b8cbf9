import BookwormCore
import Foundation
import HTTPTypes
import Hummingbird
import PostgresNIO

/// `/v1/me/pins` (API.md, Places): owner only, exactly one default while the user has pins.
package struct PinsRoutes: Sendable {
    let service: PinsService

    package init(service: PinsService) {
        self.service = service
    }

    package func addRoutes(authenticated: RouterGroup<AppRequestContext>) {
        authenticated.post("me/pins", use: create)
        authenticated.get("me/pins", use: list)
        authenticated.patch("me/pins/:id", use: update)
        authenticated.delete("me/pins/:id", use: delete)
    }

    @Sendable func list(_ request: Request, context: AppRequestContext) async throws -> Response {
        let mine = try await service.list(owner: context.requireSession().user.id)
        return try .json(Page(data: mine, nextCursor: nil), for: request)
    }

    @Sendable func create(_ request: Request, context: AppRequestContext) async throws -> Response {
        let owner = try context.requireSession().user.id
        var request = request
        let body = try await request.decodeStrict(CreatePinBody.self, context: context)
        var errors: [FieldError] = []
        let label = try collectFieldErrors(&errors) { try PlacesValidation.label(body.label) }
        let kind = try collectFieldErrors(&errors) { try PlacesValidation.kind(body.kind) }
        let point = try collectFieldErrors(&errors) { try PlacesValidation.point(latitude: body.latitude, longitude: body.longitude) }
        guard errors.isEmpty, let label, let kind, let point else { throw AppError.validation(errors) }
        let made = try await service.create(id: try ClientMadeID.checked(body.id), owner: owner, label: label, kind: kind,
                                            point: point, makeDefault: body.isDefault == true)
        return try .json(made.view, status: made.isNew ? .created : .ok, for: request)
    }

    @Sendable func update(_ request: Request, context: AppRequestContext) async throws -> Response {
        let owner = try context.requireSession().user.id
        let id = try context.parameters.uuid("id")
        var request = request
        let body = try await request.decodeStrict(UpdatePinBody.self, context: context)
        let pin = try await service.update(owner: owner, id: id, label: try body.label.map(PlacesValidation.label),
                                           kind: try body.kind.map(PlacesValidation.kind), latitude: body.latitude,
                                           longitude: body.longitude, isDefault: body.isDefault)
        return try .json(pin, for: request)
    }

    @Sendable func delete(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await service.delete(owner: context.requireSession().user.id, id: context.parameters.uuid("id"))
        return .noContent()
    }
}
