import BookwormCore
import Foundation
import Logging
import PostgresNIO

/// What the rooms call to push: queued in the caller's transaction, as mail is, so a push exists
/// exactly when the change it tells of does. With no provider configured it queues nothing.
package struct PushQueue: Sendable {
    let store: PushStore
    let platforms: [String]
    let clock: any AppClock

    package init(client: Database, settings: PushSettings, clock: any AppClock, logger: Logger) {
        self.store = PushStore(client: client, logger: logger)
        self.platforms = settings.platforms
        self.clock = clock
    }

    /// The queued pushes' job ids.
    @discardableResult
    package func enqueue(_ messages: [PushMessage], on connection: PostgresConnection) async throws -> [UUID] {
        guard !platforms.isEmpty, !messages.isEmpty else { return [] }
        return try await store.enqueue(messages, platforms: platforms, now: clock.now(), on: connection)
    }
}
