import BookwormCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import PostgresNIO

/// Health checks and the OpenAPI document.
struct SystemRoutes: Sendable {
    let client: Database
    let migrator: Migrator
    let logger: Logger
    let openAPIDocument: Data
    let drain: ShutdownDrain

    func addRoutes(to router: Router<AppRequestContext>) {
        router.get("health/live") { request, _ in
            try Response.json(["status": "ok"], for: request)
        }
        router.get("health/ready", use: ready)
        router.get("openapi.json") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json", .cacheControl: "public, max-age=300"],
                     body: .init(byteBuffer: ByteBuffer(bytes: openAPIDocument)))
        }
    }

    /// Ready means: not draining for a shutdown, the database answers within the pool's
    /// deadlines and no migration is pending.
    @Sendable func ready(_ request: Request, context: AppRequestContext) async throws -> Response {
        guard !drain.isDraining else { throw AppError.unavailable("The server is shutting down") }
        // The probe runs under the pool's deadlines, so an outage answers as fast as any route.
        let check = Task {
            try await client.withConnection { connection in try await connection.query("SELECT 1", logger: logger) }
            return try await migrator.pending(client: client.client, logger: logger)
        }
        let timeout = Task {
            try await Task.sleep(for: client.deadlines.acquire + client.deadlines.statement)
            check.cancel()
        }
        defer { timeout.cancel() }
        do {
            let pending = try await check.value
            guard pending.isEmpty else {
                throw AppError.unavailable("Pending migrations: \(pending.map(\.name).joined(separator: ", "))")
            }
            return try .json(["status": "ready"], for: request)
        } catch let error as AppError {
            throw error
        } catch {
            context.logger.warning("readiness check failed", metadata: ["error": .string(String(reflecting: error))])
            throw AppError.unavailable("The database is not reachable")
        }
    }
}
