import BookwormCore
import Foundation
import Hummingbird

/// `POST /v1/me/exports` → 202, `GET /v1/me/exports/{id}`, and the archive itself.
package struct ExportRoutes: Sendable {
    let service: ExportService

    package init(service: ExportService) {
        self.service = service
    }

    package func addRoutes(authenticated: RouterGroup<AppRequestContext>) {
        authenticated.post("me/exports", use: start)
        authenticated.get("me/exports/:id", use: get)
        authenticated.get("me/exports/:id/archive", use: download)
    }

    @Sendable func start(_ request: Request, context: AppRequestContext) async throws -> Response {
        let user = try context.requireSession().user.id
        return try .json(try await service.start(user: user), status: .accepted, for: request)
    }

    @Sendable func get(_ request: Request, context: AppRequestContext) async throws -> Response {
        let user = try context.requireSession().user.id
        return try .json(try await service.view(try context.parameters.uuid("id"), user: user), for: request)
    }

    @Sendable func download(_ request: Request, context: AppRequestContext) async throws -> Response {
        let user = try context.requireSession().user.id
        let id = try context.parameters.uuid("id")
        let bytes = try await service.archive(id, user: user)
        return Response(status: .ok, headers: [
            .contentType: "application/zip",
            .contentDisposition: "attachment; filename=\"bookworm-export-\(id.apiString.prefix(8)).zip\"",
            .cacheControl: "private, no-store",
        ], body: .init(byteBuffer: bytes))
    }
}
