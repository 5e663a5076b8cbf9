import BookwormCore
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// Sessions this process has just looked up, by token hash, for a few seconds: a signed-in
/// request then skips the session statement, a second round trip that cost the server
/// 0.11–0.14 ms of CPU and the database 0.05 ms. It is trusted only while `SessionChanges`
/// holds `LISTEN sessions`, on which triggers name every user whose sessions or user row
/// changed (migration 0021): their entries go at once. When the listener is not listening (starting, reconnecting), nothing is
/// kept and every request reads its session. A revocation therefore reaches another process
/// as fast as PostgreSQL delivers the notification, and this one before the response.
package final class SessionCache: Sendable {
    /// How long an entry is trusted at most, whatever the notifications say. Shorter than
    /// `SessionStore.touchInterval`, so an active session's idle expiry still moves forward.
    package static let lifetime: Double = 10
    /// Sessions kept at most (about half a kilobyte each, the user row included); past it the
    /// cache starts afresh. Ten seconds of 100,000 different signed-in users is far beyond one
    /// process's load, so a reset is rare, and costs one lookup per session.
    static let capacity = 100_000

    struct Entry {
        let session: AuthenticatedSession
        let keptUntil: Date
    }

    struct State {
        var entries: [ByteBuffer: Entry] = [:]
        /// Each user's kept token hashes, so that a notification drops them without a scan.
        var byUser: [UUID: Set<ByteBuffer>] = [:]
        var listening = false
        /// Moves on every drop, so a lookup that raced one is not kept (see `keep`).
        var generation: UInt64 = 0
    }

    private let state = Mutex(State())

    package init() {}

    /// The session kept for `tokenHash`, if it is still trusted at `now`.
    func session(_ tokenHash: ByteBuffer, now: Date) -> AuthenticatedSession? {
        state.withLock { state in
            guard state.listening, let entry = state.entries[tokenHash] else { return nil }
            guard now < entry.keptUntil else {
                state.entries[tokenHash] = nil
                state.byUser[entry.session.user.id]?.remove(tokenHash)
                return nil
            }
            return entry.session
        }
    }

    var isListening: Bool { state.withLock { $0.listening } }

    /// Whether `sessionID` of `userID` is kept and trusted at `now`. Its revocation drops it here
    /// before the listener hands the same notification on, so a check that finds it held is
    /// followed by that notification, not preceded.
    func holds(sessionID: UUID, of userID: UUID, now: Date) -> Bool {
        state.withLock { state in
            guard state.listening, let hashes = state.byUser[userID] else { return false }
            return hashes.contains { hash in
                state.entries[hash].map { $0.session.sessionID == sessionID && now < $0.keptUntil } ?? false
            }
        }
    }

    /// Taken before a lookup in the database, and handed to `keep` after it.
    func generation() -> UInt64 { state.withLock { $0.generation } }

    /// Keeps a session read from the database, unless anything was dropped since the read
    /// began (`generation`): its row may have changed after it was read.
    func keep(_ tokenHash: ByteBuffer, _ session: AuthenticatedSession, readAt generation: UInt64, now: Date, expiresAt: Date) {
        state.withLock { state in
            guard state.listening, state.generation == generation else { return }
            if state.entries.count >= Self.capacity {
                state.entries.removeAll(keepingCapacity: true)
                state.byUser.removeAll(keepingCapacity: true)
            }
            let until = min(now.addingTimeInterval(Self.lifetime), expiresAt)
            state.entries[tokenHash] = Entry(session: session, keptUntil: until)
            state.byUser[session.user.id, default: []].insert(tokenHash)
        }
    }

    /// Drops every kept session of `userID`.
    package func drop(userID: UUID) {
        state.withLock { state in
            state.generation &+= 1
            for tokenHash in state.byUser.removeValue(forKey: userID) ?? [] { state.entries[tokenHash] = nil }
        }
    }

    /// Starts or stops trusting entries; either way, everything kept so far goes.
    func setListening(_ listening: Bool) {
        state.withLock { state in
            state.generation &+= 1
            state.entries.removeAll()
            state.byUser.removeAll()
            state.listening = listening
        }
    }
}

/// Holds `LISTEN sessions` for `SessionCache`: each notification names a user whose kept
/// sessions go. Reconnects after a pause when the connection drops; meanwhile the cache keeps
/// nothing.
package struct SessionChanges: Service {
    let client: Database
    let cache: SessionCache
    let logger: Logger

    package init(client: Database, cache: SessionCache, logger: Logger) {
        self.client = client
        self.cache = cache
        self.logger = logger
    }

    package func run() async throws {
        await cancelWhenGracefulShutdown {
            await client.listen("sessions", logger: logger, listening: listening) { payload in notified(payload) }
        }
    }

    /// A payload of the `sessions` channel: the user whose kept sessions go.
    package func notified(_ payload: String) {
        if let userID = UUID(uuidString: payload) { cache.drop(userID: userID) }
    }

    /// Whether notifications are being heard (the cache trusts what it keeps only meanwhile).
    package func listening(_ listening: Bool) {
        cache.setListening(listening)
    }
}
