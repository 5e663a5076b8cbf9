import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// Registering phones for push: one account per phone, at most `DeviceValidation.perUser` per user.
package struct DevicesService: Sendable {
    let client: Database
    let store: DevicesStore
    let clock: any AppClock
    let logger: Logger

    package init(client: Database, clock: any AppClock, logger: Logger) {
        self.client = client
        self.store = DevicesStore(client: client, logger: logger)
        self.clock = clock
        self.logger = logger
    }

    /// The device, and whether it is new to this user (201) or theirs already (200). The user row
    /// is locked first, so concurrent registrations count each other against the cap.
    func register(session: AuthenticatedSession, platform: String, token: String, environment: String) async throws -> (DeviceView, isNew: Bool) {
        try await client.transaction(logger: logger) { connection in
            try await connection.query("SELECT 1 FROM users WHERE id = \(session.user.id) FOR NO KEY UPDATE", logger: logger)
            let holder = try await store.holder(platform: platform, token: token, on: connection)
            // A phone that changes accounts is a new device: pushes queued for the old account,
            // which name its trades and books, go with the old row and never reach the new one.
            if let holder, holder != session.user.id {
                try await store.delete(platform: platform, token: token, on: connection)
            }
            let device = try await store.upsert(user: session.user.id, session: session.sessionID, platform: platform, token: token,
                                                environment: environment, now: clock.now(), on: connection)
            try await store.trim(user: session.user.id, keep: DeviceValidation.perUser, on: connection)
            return (device, holder != session.user.id)
        }
    }

    func list(session: AuthenticatedSession, page: PageRequest) async throws -> Page<DeviceView> {
        page.page(try await store.list(user: session.user.id, session: session.sessionID, limit: page.limit + 1, after: page.after),
                  cursor: \.cursor, item: { $0 })
    }

    func delete(_ id: UUID, session: AuthenticatedSession) async throws {
        // A transaction for one statement, so that an Idempotency-Key's answer is kept with it.
        try await client.transaction(logger: logger) { connection in
            guard try await store.delete(id, user: session.user.id, on: connection) else { throw AppError.notFound("No such device") }
        }
    }
}
