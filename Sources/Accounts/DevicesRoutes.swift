import BookwormCore
import Foundation
import Hummingbird

/// `POST/GET /v1/me/devices`, `DELETE /v1/me/devices/{id}` (API.md, Devices and push).
package struct DevicesRoutes: Sendable {
    let service: DevicesService

    package init(service: DevicesService) {
        self.service = service
    }

    package func addRoutes(authenticated: RouterGroup<AppRequestContext>) {
        authenticated.post("me/devices", use: register)
        authenticated.get("me/devices", use: list)
        authenticated.delete("me/devices/:id", use: delete)
    }

    @Sendable func register(_ request: Request, context: AppRequestContext) async throws -> Response {
        let session = try context.requireSession()
        var request = request
        let (platform, token, environment) = try DeviceValidation.check(try await request.decodeStrict(RegisterDeviceBody.self, context: context))
        let (device, isNew) = try await service.register(session: session, platform: platform, token: token, environment: environment)
        return try .json(device, status: isNew ? .created : .ok, for: request)
    }

    @Sendable func list(_ request: Request, context: AppRequestContext) async throws -> Response {
        try .json(try await service.list(session: context.requireSession(), page: PageRequest(request)), for: request)
    }

    @Sendable func delete(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await service.delete(try context.parameters.uuid("id"), session: context.requireSession())
        return .noContent()
    }
}
