import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Metrics
import NIOCore
import ServiceLifecycle
import Synchronization

/// The process's open event streams, by user, within two limits: `maxStreams` in the process
/// (503 past it, so streams never take every connection the server allows) and `perUser` for
/// one user (the oldest is closed: a phone that reconnects without closing its old stream
/// must not lock itself out).
package final class LiveStreams: Sendable {
    package struct Settings: Sendable {
        package var maxStreams = 2048
        package var perUser = 5
        package var heartbeatSeconds = 25
        package init() {}
    }

    package let settings: Settings
    /// Whether a session of a user is still live. A cache may answer only if a revocation
    /// drops the session from it before the revocation's notification reaches `LiveEvents`,
    /// which closes the streams registered by then.
    let sessionIsLive: @Sendable (_ userID: UUID, _ sessionID: UUID) async throws -> Bool
    private struct State {
        var byID: [UInt64: LiveStream] = [:]
        var byUser: [UUID: [LiveStream]] = [:]
        var postStreams: [UInt64: LiveStream] = [:]
        var nextID: UInt64 = 0
    }
    private let state = Mutex(State())
    private let gauge = Gauge(label: "bookworm_live_streams")

    package init(settings: Settings, sessionIsLive: @escaping @Sendable (_ userID: UUID, _ sessionID: UUID) async throws -> Bool) {
        self.settings = settings
        self.sessionIsLive = sessionIsLive
    }

    /// The answer to a stream request: its headers alone for HEAD; else a stream opened for the
    /// signed-in caller, `first` sent on it (what happened before it registered), and its
    /// response. A stream whose `first` fails goes again, with the error.
    package func serve(_ topic: LiveStream.Topic, _ request: Request, context: AppRequestContext,
                       first: (LiveStream) async throws -> ServerSentEvent) async throws -> Response {
        let session = try context.requireSession()
        guard request.method != .head else { return Response(status: .ok, headers: Self.headers) }
        // Nothing is read on a stream's connection once it starts: a body still arriving would
        // leave the request being read, and the idle timeout would end the stream.
        guard request.headers[.contentLength].map({ $0 == "0" }) ?? (request.headers[.transferEncoding] == nil) else {
            throw AppError.invalid("body", "must be empty: a stream request has no body")
        }
        let stream = try await open(userID: session.user.id, sessionID: session.sessionID, topic: topic, context: context)
        do {
            stream.send(try await first(stream))
        } catch {
            remove(stream)
            throw error
        }
        return response(stream)
    }

    /// A new stream for the request's connection, registered before anything is read for it,
    /// so no notification that arrives meanwhile is missed; it leaves the registry when its
    /// connection closes, whether or not its response was ever written. A session revoked just
    /// before it registered was told to no stream: it is checked once more after registering
    /// (every revocation after that reaches the stream).
    func open(userID: UUID, sessionID: UUID, topic: LiveStream.Topic, context: AppRequestContext) async throws -> LiveStream {
        let stream = try register(userID: userID, sessionID: sessionID, topic: topic, context: context)
        do {
            try await stream.attach()
            guard try await sessionIsLive(userID, sessionID) else {
                throw AppError.unauthorized(code: "invalid_token", detail: "The token is unknown, expired or revoked")
            }
        } catch {
            remove(stream)
            throw error
        }
        return stream
    }

    /// Sends each event to its stream: one hop to each event loop with all of its streams'
    /// events, not one per stream.
    package static func send(_ deliveries: [(LiveStream, ServerSentEvent)]) {
        onLoops(deliveries, loop: \.0.loop) { stream, event in stream.sendOnLoop(event.chunk) }
    }

    /// `body` for each stream, on the stream's loop, one hop to each loop.
    static func onLoops(_ streams: [LiveStream], _ body: @escaping @Sendable (LiveStream) -> Void) {
        onLoops(streams, loop: \.loop, body)
    }

    private static func onLoops<Item: Sendable>(_ items: [Item], loop: (Item) -> any EventLoop, _ body: @escaping @Sendable (Item) -> Void) {
        var byLoop: [ObjectIdentifier: (loop: any EventLoop, items: [Item])] = [:]
        for item in items {
            let itemLoop = loop(item)
            byLoop[ObjectIdentifier(itemLoop), default: (itemLoop, [])].items.append(item)
        }
        for (loop, items) in byLoop.values {
            loop.execute {
                for item in items { body(item) }
            }
        }
    }

    /// Sends `event` to every stream of `streams` (one event for all: no pair per stream).
    package static func send(_ event: ServerSentEvent, to streams: [LiveStream]) {
        onLoops(streams) { $0.sendOnLoop(event.chunk) }
    }

    private func register(userID: UUID, sessionID: UUID, topic: LiveStream.Topic, context: AppRequestContext) throws -> LiveStream {
        var evicted: LiveStream?
        let stream = try state.withLock { state -> LiveStream in
            var mine = state.byUser[userID, default: []]
            // The user's oldest goes first, so a user at the limit on a full process still gets in.
            let evicting = mine.count >= settings.perUser
            guard state.byID.count - (evicting ? 1 : 0) < settings.maxStreams else { throw AppError.overloaded(retryAfterSeconds: 5) }
            if evicting {
                evicted = mine.removeFirst()
                if let evicted { Self.forget(evicted, in: &state) }
            }
            state.nextID += 1
            let stream = LiveStream(id: state.nextID, userID: userID, sessionID: sessionID, topic: topic, channel: context.channel)
            mine.append(stream)
            state.byUser[userID] = mine
            state.byID[stream.id] = stream
            if case .posts = topic { state.postStreams[stream.id] = stream }
            return stream
        }
        // By id, not by a weak reference: a weak reference gives the stream a side table, and
        // every retain of it in a fan-out goes the slow way after that. A stream no longer
        // registered has had its end opened already (removed once its response ended, or
        // evicted with `close`), so it needs nothing from here.
        let id = stream.id
        context.channel.closeFuture.whenComplete { _ in
            guard let stream = self.state.withLock({ $0.byID[id] }) else { return }
            stream.drop()
            self.remove(stream)
        }
        evicted?.close(with: ServerSentEvent(event: "bye", data: ServerSentEvent.json(["reason": "too_many_streams"])))
        gauge.record(count)
        return stream
    }

    /// Takes the stream out once its response has ended, or failed before it started (then its
    /// writer leaves the pipeline too).
    package func remove(_ stream: LiveStream) {
        stream.leave()
        state.withLock { state in
            guard state.byID[stream.id] != nil else { return }
            Self.forget(stream, in: &state)
            if var mine = state.byUser[stream.userID] {
                mine.removeAll { $0.id == stream.id }
                state.byUser[stream.userID] = mine.isEmpty ? nil : mine
            }
        }
        gauge.record(count)
    }

    private static func forget(_ stream: LiveStream, in state: inout State) {
        state.byID[stream.id] = nil
        state.postStreams[stream.id] = nil
    }

    package var count: Int { state.withLock { $0.byID.count } }

    /// The users' streams of `.mine`.
    package func mine(of users: [UUID]) -> [LiveStream] {
        state.withLock { state in
            var mine: [LiveStream] = []
            for user in users {
                for stream in state.byUser[user] ?? [] { if case .mine = stream.topic { mine.append(stream) } }
            }
            return mine
        }
    }

    package func hasStreams(of userID: UUID) -> Bool {
        state.withLock { $0.byUser[userID] != nil }
    }

    package var postStreams: [LiveStream] { state.withLock { Array($0.postStreams.values) } }

    package var hasPostStreams: Bool { state.withLock { !$0.postStreams.isEmpty } }

    package var all: [LiveStream] { state.withLock { Array($0.byID.values) } }

    package func users() -> [UUID] { state.withLock { Array($0.byUser.keys) } }

    static let headers: HTTPFields = [
        .contentType: "text/event-stream; charset=utf-8", .cacheControl: "no-store",
        HTTPField.Name.constant("X-Accel-Buffering"): "no",
    ]

    /// A stream is its connection's last response (`LiveStreamWriter`).
    static let streamHeaders: HTTPFields = headers + [HTTPField(name: .connection, value: "close")]

    /// The response for `stream`: `text/event-stream`, never cached or buffered by a proxy.
    /// Its events are written by the stream; the body only waits for its end.
    func response(_ stream: LiveStream) -> Response {
        Response(status: .ok, headers: Self.streamHeaders, body: ResponseBody { [self] writer in
            defer { remove(stream) }
            await stream.run()
            try await writer.finish(nil)
        })
    }
}

/// Every `heartbeatSeconds`: a comment line on every stream (proxies close a silent
/// connection), streams whose channel has stayed over its high-water mark for a whole interval
/// (the client stopped reading) dropped, and `recheck` (the sessions behind the streams, looked at again).
package struct LiveHeartbeat: Service {
    let streams: LiveStreams
    let recheck: @Sendable () async -> Void
    let logger: Logger

    package init(streams: LiveStreams, logger: Logger, recheck: @escaping @Sendable () async -> Void) {
        self.streams = streams
        self.logger = logger
        self.recheck = recheck
    }

    package func run() async throws {
        let interval = Duration.seconds(streams.settings.heartbeatSeconds)
        let comment = ServerSentEvent(comment: "keep-alive")
        await cancelWhenGracefulShutdown {
            while (try? await Task.sleep(for: interval)) != nil { await beat(comment, limit: interval) }
        }
    }

    private func beat(_ comment: ServerSentEvent, limit interval: Duration) async {
        let logger = logger
        LiveStreams.onLoops(streams.all) { stream in
            stream.beatOnLoop(comment, limit: interval) {
                logger.info("live stream dropped: its client stopped reading", metadata: ["user_id": "\(stream.userID)"])
            }
        }
        await recheck()
    }
}
