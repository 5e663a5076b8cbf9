import Accounts
import BookwormCore
import Discovery
import Foundation
import Hummingbird
import Logging
import Places
import Portability
import ServiceLifecycle
import Synchronization

/// The two event streams (API.md, Live updates) and the services behind them: the listener and
/// its fan-out, and the heartbeat.
func addLiveRoutes(authenticated: RouterGroup<AppRequestContext>, config: Config, client: Database, sessions: SessionStore,
                   sessionChanges: SessionChanges, logger: Logger) -> [any Service] {
    let streams = LiveStreams(settings: config.live) { userID, sessionID in try await sessions.isLive(sessionID, of: userID) }
    let sync = SyncStore(client: client, logger: logger)
    let posts = LivePostsStore(client: client, logger: logger)
    let events = LiveEvents(client: client, streams: streams, sessions: sessions, sessionChanges: sessionChanges, sync: sync,
                            posts: posts, logger: logger)
    let inbox = events.inbox
    EventsRoutes(streams: streams, sync: sync) { user, xid in inbox.add(LiveNotice.channel, "s \(user.apiString) \(xid)") }
        .addRoutes(authenticated: authenticated)
    // On the primary: its clock, which stamps posts, places the feed's cursor.
    LivePostsRoutes(streams: streams, store: posts).addRoutes(authenticated: authenticated)
    return [events, LiveHeartbeat(streams: streams, logger: logger) { await events.recheckSessions(of: nil) }]
}

/// The process's one `LISTEN` connection (channels `events` and `sessions`), and the fan-out of
/// what it hears to this process's live streams. Notifications are queued by the listener and
/// handled in batches by one task, so a burst costs a statement per batch, not per event.
struct LiveEvents: Service {
    let client: Database
    let streams: LiveStreams
    let sessions: SessionStore
    let sessionChanges: SessionChanges
    let sync: SyncStore
    let posts: LivePostsStore
    let logger: Logger
    let inbox = LiveInbox()

    func run() async throws {
        let inbox = inbox, sessionChanges = sessionChanges
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.dispatch() }
                group.addTask {
                    await client.listen([LiveNotice.channel, "sessions"], logger: logger, listening: { listening in
                        sessionChanges.listening(listening)
                        inbox.listening(listening)
                    }) { channel, payload in
                        // The cache drops a revoked session before the dispatcher hears of it:
                        // a stream that found it held is registered by then and rechecked
                        // (`LiveStreams.sessionIsLive`). Swapped, a stream could miss it.
                        if channel == "sessions" { sessionChanges.notified(payload) }
                        inbox.add(channel, payload)
                    }
                }
                await group.next()
                group.cancelAll()
            }
        }
    }

    /// Takes what the listener queued, batch by batch, until cancelled.
    private func dispatch() async {
        var pending: [UUID: UInt64] = [:]
        // While pokes wait for an older transaction to end, the horizon is read again after
        // this long, doubling up to a second while it stays stuck.
        var retry = Duration.milliseconds(20)
        while !Task.isCancelled {
            let waited = pending.count
            let batch = await inbox.next(retryAfter: pending.isEmpty ? nil : retry)
            do {
                try await handle(batch, pending: &pending)
                retry = pending.isEmpty || pending.count < waited ? .milliseconds(20) : min(retry * 2, .seconds(1))
            } catch {
                // A database that cannot answer now: every stream pulls once it is back.
                logger.warning("live events: a batch failed", metadata: ["error": .string("\(error)")])
                pending = [:]
                inbox.missedSome()
            }
        }
    }

    private func handle(_ batch: LiveInbox.Batch, pending: inout [UUID: UInt64]) async throws {
        try await collect(batch, pending: &pending)
        guard !pending.isEmpty else { return }
        let position = try await sync.position()
        // The rest of a burst (one statement's notifications, one per user) usually arrives
        // while the position is read: it goes out at that position too rather than after
        // another read. The rule is the same: a change below the position is in a pull from it.
        if let more = inbox.takeQueued() { try await collect(more, pending: &pending) }
        poke(&pending, at: position)
    }

    /// Handles what needs no sync position, and adds the users whose sync scope changed to `pending`.
    private func collect(_ batch: LiveInbox.Batch, pending: inout [UUID: UInt64]) async throws {
        if batch.resync {
            // Every stream pulls now, which covers whatever was waiting for the horizon too.
            pending = [:]
            LiveStreams.send(.resync, to: streams.all)
            await recheckSessions(of: nil)
        }
        var sessionUsers: Set<UUID> = [], postIDs: [UUID] = []
        for (channel, payload) in batch.notifications {
            let text = Substring(payload)
            if channel == "sessions" {
                if let user = UUID(canonical: text), streams.hasStreams(of: user) { sessionUsers.insert(user) }
                continue
            }
            switch text.first {
            case "s":
                if let (user, xid) = Self.syncChange(text), streams.hasStreams(of: user) {
                    pending[user] = max(pending[user] ?? 0, xid)
                }
            case "p":
                if let id = UUID(canonical: text.dropFirst(2)), streams.hasPostStreams { postIDs.append(id) }
            case "n":
                if let notice = LiveNotice(payload: text) { tell(notice) }
            default: break
            }
        }
        if !sessionUsers.isEmpty { await recheckSessions(of: sessionUsers) }
        if !postIDs.isEmpty {
            do {
                try await fanOut(postIDs)
            } catch {
                // Only the live feeds missed something: they page the ordinary feed again.
                logger.warning("live events: posts could not be sent", metadata: ["error": .string("\(error)")])
                LiveStreams.send(.resync, to: streams.postStreams)
            }
        }
    }

    /// `s <user> <xid>`: the user's sync scope changed in transaction `xid`.
    static func syncChange(_ text: Substring) -> (user: UUID, xid: UInt64)? {
        let id = text.dropFirst(2).prefix(36)
        guard text.hasPrefix("s "), let user = UUID(canonical: id), text[id.endIndex...].first == " ",
              let xid = UInt64(text[id.endIndex...].dropFirst()) else { return nil }
        return (user, xid)
    }

    private func tell(_ notice: LiveNotice) {
        let data = ServerSentEvent.json(["id": notice.objectID.apiString, "kind": notice.kind])
        LiveStreams.send(ServerSentEvent(event: notice.event, data: data), to: streams.mine(of: [notice.userID]))
    }

    /// Pokes the users whose changes the sync horizon has passed; the others wait for it (an
    /// older transaction still running), and are looked at again shortly.
    private func poke(_ pending: inout [UUID: UInt64], at position: SyncToken) {
        let token = position.encoded
        let event = ServerSentEvent(event: "sync", id: token, data: ServerSentEvent.json(["token": token]))
        var poked: [UUID] = []
        for (user, xid) in pending where xid < position.xid {
            pending[user] = nil
            poked.append(user)
        }
        LiveStreams.send(event, to: streams.mine(of: poked))
    }

    /// Each new post to the live feeds whose circle holds it, but not to a viewer on either
    /// side of a block with its author. Hidden posts and suspended authors never get this far.
    private func fanOut(_ ids: [UUID]) async throws {
        let feeds = streams.postStreams
        for post in try await posts.shown(ids) {
            var seen: [(LiveStream, (shownKm: Double, view: PostView))] = []
            for stream in feeds {
                guard case .posts(let latitude, let longitude, let radius) = stream.topic,
                      let view = post.seen(from: GeoPoint(latitude: latitude, longitude: longitude), radiusKm: radius) else { continue }
                seen.append((stream, view))
            }
            guard !seen.isEmpty else { continue }
            let blocked = try await posts.blocked(author: post.authorID, viewers: Array(Set(seen.map(\.0.userID))))
            // Viewers differ only in the distance, shown to 0.1 km: one event per distance shown.
            var events: [Double: ServerSentEvent] = [:], deliveries: [(LiveStream, ServerSentEvent)] = []
            for (stream, (shown, view)) in seen where !blocked.contains(stream.userID) {
                let event = try events[shown] ?? ServerSentEvent(event: "post", data: String(decoding: JSONEncoder.api.encode(view), as: UTF8.self))
                events[shown] = event
                deliveries.append((stream, event))
            }
            LiveStreams.send(deliveries)
        }
    }

    /// Ends the streams whose session is no longer live: of `users`, or of everyone.
    func recheckSessions(of users: Set<UUID>?) async {
        let open = streams.all.filter { users?.contains($0.userID) ?? true }
        guard !open.isEmpty else { return }
        do {
            let live = try await sessions.stillLive(Array(Set(open.map(\.sessionID))))
            for stream in open where !live.contains(stream.sessionID) { stream.close() }
        } catch {
            logger.warning("live events: sessions could not be checked", metadata: ["error": .string("\(error)")])
        }
    }
}

/// What the listener heard and not yet handled. Past `limit` queued notifications the rest are
/// dropped and every stream is told to pull (`resync`), so a burst costs bounded memory.
final class LiveInbox: Sendable {
    struct Batch {
        var notifications: [(String, String)] = []
        var resync = false
    }

    private struct State {
        var batch = Batch()
        /// Set by the retry timer: the next wait returns even with nothing queued.
        var kicked = false
        /// How many of `batch.notifications` are taken already.
        var head = 0
        var waiter: CheckedContinuation<Void, Never>?
    }

    static let limit = 100_000
    static let batchLimit = 256
    private let state = Mutex(State())

    func add(_ channel: String, _ payload: String) {
        wake { state in
            if state.batch.notifications.count - state.head < Self.limit {
                state.batch.notifications.append((channel, payload))
            } else {
                state.batch.resync = true
            }
        }
    }

    /// A listener that starts hearing may have missed anything before (a stream can open before
    /// the first `LISTEN`, or while it reconnects): every stream pulls.
    func listening(_ listening: Bool) {
        if listening { wake { $0.batch.resync = true } }
    }

    func missedSome() {
        wake { $0.batch.resync = true }
    }

    private func wake(_ change: (inout State) -> Void) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            change(&state)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// The next batch, once there is one; with `retryAfter`, after that long at most even if empty.
    func next(retryAfter: Duration?) async -> Batch {
        let timer = retryAfter.map { delay in
            Task { [weak self] in
                // Cancelled (a batch came first): no kick, or the next wait would end at once.
                guard (try? await Task.sleep(for: delay)) != nil else { return }
                self?.wake { $0.kicked = true }
            }
        }
        defer { timer?.cancel() }
        await waitForAny()
        return state.withLock { state in
            state.kicked = false
            return Self.take(&state)
        }
    }

    /// What is queued now, if anything, without waiting.
    func takeQueued() -> Batch? {
        state.withLock { state in
            state.batch.notifications.count > state.head || state.batch.resync ? Self.take(&state) : nil
        }
    }

    /// At most `batchLimit` at a time, so that what one batch writes to a stream stays well
    /// within its budget however far behind its client is.
    private static func take(_ state: inout State) -> Batch {
        let queued = state.batch.notifications
        guard queued.count - state.head > Self.batchLimit else {
            defer {
                state.batch = Batch()
                state.head = 0
            }
            return Batch(notifications: Array(queued[state.head...]), resync: state.batch.resync)
        }
        let taken = Batch(notifications: Array(queued[state.head..<(state.head + Self.batchLimit)]), resync: state.batch.resync)
        state.head += Self.batchLimit
        if state.head >= 4096 {
            state.batch.notifications.removeFirst(state.head)
            state.head = 0
        }
        state.batch.resync = false
        return taken
    }

    private func waitForAny() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> Bool in
                    if state.batch.notifications.count > state.head || state.batch.resync || state.kicked || Task.isCancelled { return true }
                    state.waiter = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            wake { $0.kicked = true }
        }
    }
}
