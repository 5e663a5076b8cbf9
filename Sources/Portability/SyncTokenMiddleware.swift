import BookwormCore
import HTTPTypes
import Hummingbird
import Logging

extension HTTPField.Name {
    package static let syncToken = Self.constant("Sync-Token")
}

/// `Sync-Token` on every successful write of a signed-in user: the sync position right after the
/// write. Sync always reads the primary, so no sync after this answer, from this token or an
/// older one, returns a state older than the write. It runs outside `IdempotencyMiddleware`, after
/// the write's commit, and a replay gets a position of its own.
package struct SyncTokenMiddleware: RouterMiddleware {
    package typealias Context = AppRequestContext
    let log: SyncStore

    package init(client: Database, logger: Logger) {
        log = SyncStore(client: client, logger: logger)
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        guard IdempotencyMiddleware.writes.contains(request.method), context.session != nil, (200..<300).contains(response.status.code) else {
            return response
        }
        // The write is done: a database that cannot answer now costs the header, not the answer.
        if let position = try? await log.position() { response.headers[.syncToken] = position.encoded }
        return response
    }
}
