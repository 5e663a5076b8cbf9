import Accounts
import BookwormCore
import Discovery
import Foundation
import Hummingbird
import Logging
import Places
import Portability
import ServiceLifecycle

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
        var pokes = LivePokes()
        // While pokes wait for an older transaction to end, the horizon is read again after
        // this long, doubling up to a second while it stays stuck.
        var retry = Duration.milliseconds(20)
        while !Task.isCancelled {
            let waited = pokes.count
            let batch = await inbox.next(retryAfter: pokes.isEmpty ? nil : retry)
            do {
                try await handle(batch, pokes: &pokes)
                retry = pokes.isEmpty || pokes.count < waited ? .milliseconds(20) : min(retry * 2, .seconds(1))
            } catch {
                // A database that cannot answer now: every stream pulls once it is back.
                logger.warning("live events: a batch failed", metadata: ["error": .string("\(error)")])
                pokes.forget()
                inbox.missedSome()
            }
        }
    }

    private func handle(_ batch: LiveInbox.Batch, pokes: inout LivePokes) async throws {
        try await collect(batch, pokes: &pokes)
        pokeKnown(&pokes)
        guard !pokes.isEmpty else { return }
        pokes.read(try await sync.position())
        pokeKnown(&pokes)
        // The rest of a burst (one statement's notifications, one per user) usually arrives
        // while the horizon is read: it goes out at what is known now rather than after another
        // read. What is above it (a transaction that committed since, without a hint) gets a
        // read of its own now, as a batch of its own would have, not the retry timer's.
        guard let more = inbox.takeQueued() else { return }
        try await collect(more, pokes: &pokes)
        pokeKnown(&pokes)
        if !pokes.isEmpty {
            pokes.read(try await sync.position())
            pokeKnown(&pokes)
        }
    }

    /// Handles what needs no sync position, and adds the users whose sync scope changed to `pokes`.
    private func collect(_ batch: LiveInbox.Batch, pokes: inout LivePokes) async throws {
        if batch.resync {
            // Every stream pulls now, which covers whatever was waiting for the horizon too.
            pokes.forget()
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
                if let (user, xid) = Self.syncChange(text), streams.hasStreams(of: user) { pokes.changed(user, in: xid) }
            case "h":
                if text.hasPrefix("h "), let xid = UInt64(text.dropFirst(2)) { pokes.hinted(xid) }
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

    /// Pokes the users whose changes are known to be below the horizon; the others wait for a
    /// read (an older transaction may still be running), and are looked at again shortly.
    private func pokeKnown(_ pokes: inout LivePokes) {
        guard let position = pokes.known else { return }
        let poked = pokes.due(at: position)
        guard !poked.isEmpty else { return }
        let token = position.encoded
        let event = ServerSentEvent(event: "sync", id: token, data: ServerSentEvent.json(["token": token]))
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
