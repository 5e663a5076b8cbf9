import BookwormCore
import Foundation
import Hummingbird

/// `POST /v1/me/imports` (a Goodreads CSV, a LibraryThing JSON or a Bookworm zip) → 202 and
/// `GET /v1/me/imports/{id}` for its progress.
package struct ImportRoutes: Sendable {
    let service: ImportService

    package init(service: ImportService) {
        self.service = service
    }

    package func addRoutes(authenticated: RouterGroup<AppRequestContext>) {
        authenticated.post("me/imports", use: start)
        authenticated.get("me/imports/:id", use: get)
    }

    @Sendable func start(_ request: Request, context: AppRequestContext) async throws -> Response {
        let user = try context.requireSession().user.id
        guard let format = request.headers[.contentType].flatMap(ImportFormat.init(contentType:)) else {
            throw AppError.unsupportedMediaType("Content-Type must be text/csv (Goodreads), application/json (LibraryThing) or application/zip (a Bookworm export)")
        }
        if let length = request.headers[.contentLength].flatMap(Int.init), length > service.policy.maxBytes {
            throw AppError.payloadTooLarge(limit: service.policy.maxBytes)
        }
        return try .json(try await service.start(user: user, format: format, body: request.body), status: .accepted, for: request)
    }

    @Sendable func get(_ request: Request, context: AppRequestContext) async throws -> Response {
        let user = try context.requireSession().user.id
        return try .json(try await service.view(try context.parameters.uuid("id"), user: user), for: request)
    }
}
