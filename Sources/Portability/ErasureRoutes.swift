import BookwormCore
import Foundation
import Hummingbird

/// `DELETE /v1/me {password | id_token}` → 202: the account is erased (see `ErasureService`).
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
        let proof: ErasureProof
        switch (body.password, body.idToken) {
        case (let password?, nil):
            guard !password.isEmpty, password.count <= 1024 else { throw AppError.invalid("password", "must be 1 to 1024 characters") }
            proof = .password(password)
        case (nil, let token?):
            guard !token.isEmpty, token.utf8.count <= 8192 else { throw AppError.invalid("id_token", "is 1 to 8192 characters") }
            proof = .google(idToken: token)
        default:
            // The schema says one property (minProperties, maxProperties): a 400.
            throw AppError.invalid("password", "give exactly one of password and id_token")
        }
        try await service.erase(session.user, proof: proof, clientAddress: context.clientAddress(request))
        return Response(status: .accepted)
    }
}
