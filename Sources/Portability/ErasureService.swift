import Accounts
import BookwormCore
import Exchange
import Foundation
import Logging
import Mail

/// Erasing an account: one transaction that cancels the open trades (telling the other side),
/// hands others' history to a placeholder, deletes everything of the person, holds the username
/// and queues a confirmation to the old address; the person's sessions go with their row.
package struct ErasureService: Sendable {
    let client: Database
    let accounts: AccountsService
    let google: GoogleSignIn
    let trades: TradesService
    let outbox: OutboxStore
    let templates: MailTemplates
    let store: ErasureStore
    let policy: ErasurePolicy
    let clock: any AppClock
    let logger: Logger

    package init(client: Database, accounts: AccountsService, google: GoogleSignIn, trades: TradesService, outbox: OutboxStore,
                 templates: MailTemplates, policy: ErasurePolicy, clock: any AppClock, logger: Logger) {
        self.client = client
        self.accounts = accounts
        self.google = google
        self.trades = trades
        self.outbox = outbox
        self.templates = templates
        self.store = ErasureStore(logger: logger)
        self.policy = policy
        self.clock = clock
        self.logger = logger
    }

    func erase(_ user: UserRecord, proof: ErasureProof, clientAddress: String) async throws {
        switch proof {
        case .password(let password): try await accounts.confirmPassword(password, of: user, field: "password")
        case .google(let token): try await google.confirmOwner(idToken: token, of: user, clientAddress: clientAddress)
        }
        let now = clock.now()
        let holdUntil = now.addingTimeInterval(Double(policy.usernameHoldDays) * 86400)
        let confirmation = templates.notice(
            to: user.email, recipient: user.username, subject: "Your Bookworm account is deleted",
            text: """
                Your account \(user.username) was deleted on \(ISO8601DateFormatter().string(from: now)), as you asked.
                Your copies, pins, posts, shelf and wishes are gone, and your open trades were cancelled.
                Trades you completed show "Deleted user" to the other side. This address is now erased from
                the service; this is the last mail it sends you.
                """)
        try await client.transaction(logger: logger) { connection in
            try await store.lockUsername(user.username, on: connection)
            _ = try await trades.cancelOpenTrades(of: user.id, on: connection)
            let suppressed = try await store.isSuppressed(user.email, on: connection)
            let placeholder = try await store.makePlaceholder(at: now, on: connection)
            try await store.handOver(from: user.id, to: placeholder, on: connection)
            try await store.erase(user.id, placeholder: placeholder, email: user.email, on: connection)
            try await store.holdUsername(user.username, until: holdUntil, on: connection)
            if !suppressed { try await outbox.enqueue(confirmation, kind: .accountDeleted, on: connection) }
        }
        logger.info("account erased", metadata: ["user_id": .string(user.id.apiString)])
    }
}
