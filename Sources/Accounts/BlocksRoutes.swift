import BookwormCore
import Foundation
import Hummingbird

/// `PUT/DELETE /v1/users/{username}/block` (API.md, Accounts). Both are idempotent.
package struct BlocksRoutes: Sendable {
    package let blocks: BlocksStore
    package let users: AccountsStore
    /// What a block does besides the row (the exchange cancels open trades in the same
    /// transaction); the app wires it in, as that room sits above this one.
    package let block: @Sendable (_ blocked: UUID, _ blocker: UUID) async throws -> Void

    package init(blocks: BlocksStore, users: AccountsStore,
                 block: (@Sendable (_ blocked: UUID, _ blocker: UUID) async throws -> Void)? = nil) {
        self.blocks = blocks
        self.users = users
        self.block = block ?? { try await blocks.block($0, by: $1) }
    }

    package func addRoutes(authenticated: RouterGroup<AppRequestContext>) {
        authenticated.put("users/:username/block", use: block)
        authenticated.delete("users/:username/block", use: unblock)
    }

    @Sendable func block(_ request: Request, context: AppRequestContext) async throws -> Response {
        let me = try context.requireSession().user.id
        let other = try await target(context)
        guard other != me else { throw AppError.unprocessable("You cannot block yourself") }
        try await self.block(other, me)
        return .noContent()
    }

    @Sendable func unblock(_ request: Request, context: AppRequestContext) async throws -> Response {
        let me = try context.requireSession().user.id
        try await blocks.unblock(try await target(context), by: me)
        return .noContent()
    }

    private func target(_ context: AppRequestContext) async throws -> UUID {
        let username = try context.parameters.require("username")
        guard username.count <= 30, let user = try await users.findByUsername(username) else {
            throw AppError.notFound("No user named \(username.prefix(30))")
        }
        return user.id
    }
}
