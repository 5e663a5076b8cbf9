import BookwormCore
import Foundation
import Hummingbird

/// `DELETE /v1/me {password}` → 202: the account is erased (see `ErasureService`).
package struct ErasureRoutes: Sendable {
    let service: ErasureService

    package init(service: ErasureService) {
        self.service = service
    }

    package func addRoutes(authenticated: RouterGroup<AppRequestContext>) {
        authenticated.delete("me", use: erase)
    }

    @Sendable func erase(_ request: Request, context: AppRequestContext) async throws -> Response {
        let session = try context.requireSession()
        var request = request
        let body = try await request.decodeStrict(EraseAccountBody.self, context: context)
        guard !body.password.isEmpty, body.password.count <= 1024 else {
            throw AppError.invalid("password", "must be 1 to 1024 characters")
        }
        try await service.erase(session.user, password: body.password)
        return Response(status: .accepted)
    }
}
