import BookwormCore
import Foundation
import Hummingbird

/// `/v1/me/wishes…`, `/v1/me/alerts` and `/v1/me/matches` (API.md, Shelf).
package struct WishesRoutes: Sendable {
    let service: WishesService

    package init(service: WishesService) {
        self.service = service
    }

    package func addRoutes(authenticated: RouterGroup<AppRequestContext>) {
        authenticated.post("me/wishes", use: create)
        authenticated.get("me/wishes", use: mine)
        authenticated.delete("me/wishes/:id", use: delete)
        authenticated.get("me/alerts", use: alerts)
        authenticated.get("me/matches", use: matches)
    }

    @Sendable func create(_ request: Request, context: AppRequestContext) async throws -> Response {
        let user = try context.requireSession().user.id
        var request = request
        let wish = try WishValidation.wish(try await request.decodeStrict(NewWishBody.self, context: context), policy: service.policy)
        let made = try await service.create(user: user, wish)
        return try .json(made.view, status: made.isNew ? .created : .ok, for: request)
    }

    @Sendable func mine(_ request: Request, context: AppRequestContext) async throws -> Response {
        let user = try context.requireSession().user.id
        return try .json(try await service.mine(user: user, page: PageRequest(request)), for: request)
    }

    @Sendable func delete(_ request: Request, context: AppRequestContext) async throws -> Response {
        let user = try context.requireSession().user.id
        try await service.delete(user: user, wish: try context.parameters.uuid("id"))
        return .noContent()
    }

    @Sendable func alerts(_ request: Request, context: AppRequestContext) async throws -> Response {
        let user = try context.requireSession().user.id
        return try .json(try await service.alerts(user: user, page: PageRequest(request)), for: request)
    }

    @Sendable func matches(_ request: Request, context: AppRequestContext) async throws -> Response {
        let user = try context.requireSession().user.id
        let radius = try WishValidation.radius(request.queryValue("radius_km"), policy: service.policy)
        return try .json(try await service.matches(user: user, radiusKm: radius, limit: PageRequest.limit(request)), for: request)
    }
}
