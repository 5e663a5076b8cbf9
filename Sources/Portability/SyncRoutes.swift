import BookwormCore
import Foundation
import Hummingbird

/// `GET /v1/sync?since=&limit=`: the signed-in user's changes since a token.
package struct SyncRoutes: Sendable {
    let service: SyncService

    package init(service: SyncService) {
        self.service = service
    }

    package func addRoutes(authenticated: RouterGroup<AppRequestContext>) {
        authenticated.get("sync", use: sync)
    }

    @Sendable func sync(_ request: Request, context: AppRequestContext) async throws -> Response {
        let user = try context.requireSession().user.id
        let since = try request.queryValue("since").map { try SyncToken(encoded: String($0)) }
        var limit = service.policy.defaultLimit
        if let raw = request.queryValue("limit") {
            guard let value = Int(String(raw)), (1...service.policy.maxLimit).contains(value) else {
                throw AppError.invalid("limit", "must be a whole number from 1 to \(service.policy.maxLimit)")
            }
            limit = value
        }
        return try .json(try await service.changes(user: user, since: since, limit: limit), for: request)
    }
}
