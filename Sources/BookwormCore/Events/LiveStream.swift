import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import Synchronization

/// One Server-Sent Events response held open: what the process has to tell its client waits
/// here until the response's task writes it. The queue has a fixed budget: a client that stops
/// reading fills its socket, then this queue, and is dropped rather than buffered for.
package final class LiveStream: Sendable {
    package enum Topic: Sendable {
        /// `GET /v1/me/events`: the user's own changes and notices.
        case mine
        /// `GET /v1/posts/live`: new posts within `radiusKm` of a point.
        case posts(latitude: Double, longitude: Double, radiusKm: Double)
    }

    package let id: UInt64
    package let userID: UUID
    package let sessionID: UUID
    package let topic: Topic
    /// Bytes queued while a write has waited on the client's socket for `stall`: past it, the
    /// client is not reading and the stream is closed. A burst larger than this to a client
    /// that reads is kept, up to `cap`, whatever happens.
    static let budget = 64 * 1024
    static let cap = 256 * 1024
    static let stall = Duration.seconds(1)

    private struct State {
        var queued: [ByteBuffer] = []
        var queuedBytes = 0
        var closed = false
        var waiter: CheckedContinuation<Void, Never>?
        /// When the response's task began a write that has not finished.
        var writingSince: ContinuousClock.Instant?
    }

    private let state = Mutex(State())
    private let channel: any Channel

    init(id: UInt64, userID: UUID, sessionID: UUID, topic: Topic, channel: any Channel) {
        self.id = id
        self.userID = userID
        self.sessionID = sessionID
        self.topic = topic
        self.channel = channel
    }

    /// Queues `event`; false when the stream is closed, or closed now for being over its budget.
    @discardableResult
    package func send(_ event: ServerSentEvent) -> Bool {
        enqueue(event.bytes, thenClose: false)
    }

    /// Sends `last` (if any) and ends the response after it.
    package func close(with last: ServerSentEvent? = nil) {
        enqueue(last?.bytes, thenClose: true)
    }

    var isClosed: Bool { state.withLock { $0.closed } }

    /// A write waiting on the client's socket for longer than `limit`.
    func isStalled(now: ContinuousClock.Instant, limit: Duration) -> Bool {
        state.withLock { state in state.writingSince.map { now - $0 > limit } ?? false }
    }

    /// Ends the connection at once: a write stuck on a full socket fails, and the response's task ends.
    func drop() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.closed = true
            state.queued = []
            state.queuedBytes = 0
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
        channel.close(promise: nil)
    }

    private func enqueue(_ bytes: ByteBuffer?, thenClose: Bool) -> Bool {
        var overBudget = false
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.closed else { return nil }
            if let bytes {
                state.queued.append(bytes)
                state.queuedBytes += bytes.readableBytes
            }
            let stalled = state.writingSince.map { ContinuousClock.now - $0 > Self.stall } ?? false
            if state.queuedBytes > Self.cap || (state.queuedBytes > Self.budget && stalled) {
                overBudget = true
                return nil
            }
            if thenClose { state.closed = true }
            defer { state.waiter = nil }
            return state.waiter
        }
        if overBudget {
            drop()
            return false
        }
        waiter?.resume()
        return !thenClose || bytes != nil
    }

    /// What is queued, waiting for something if nothing is; nil once closed and written out.
    private func next() async -> [ByteBuffer]? {
        while true {
            let taken = state.withLock { state -> (buffers: [ByteBuffer], closed: Bool) in
                defer {
                    state.queued = []
                    state.queuedBytes = 0
                }
                return (state.queued, state.closed)
            }
            if !taken.buffers.isEmpty { return taken.buffers }
            if taken.closed { return nil }
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> Bool in
                    if !state.queued.isEmpty || state.closed { return true }
                    state.waiter = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }

    /// The response's body: everything queued, as it comes, until the stream closes or the
    /// client goes. The server's graceful shutdown ends it with `bye` (at once when the client
    /// is not reading: a `bye` queued behind a full socket would hold the shutdown up), and a
    /// cancelled task ends it too.
    func write(to writer: inout any ResponseBodyWriter) async throws {
        try await withTaskCancellationHandler {
            try await withGracefulShutdownHandler {
                while let buffers = await next() {
                    state.withLock { $0.writingSince = .now }
                    try await writer.write(contentsOf: buffers)
                    state.withLock { $0.writingSince = nil }
                }
                try await writer.finish(nil)
            } onGracefulShutdown: { [weak self] in
                guard let self else { return }
                if state.withLock({ $0.writingSince != nil }) { drop() } else { close(with: .bye) }
            }
        } onCancel: { [weak self] in
            self?.drop()
        }
    }
}

/// One event in the `text/event-stream` format; a line break inside a value would start a new
/// field, so `data` is written as one `data:` line per line of it and the others have none.
package struct ServerSentEvent: Sendable {
    let bytes: ByteBuffer

    package init(event: String? = nil, id: String? = nil, data: String? = nil, retryMilliseconds: Int? = nil, comment: String? = nil) {
        var text = ""
        if let comment { text += ": \(Self.oneLine(comment))\n" }
        if let retryMilliseconds { text += "retry: \(retryMilliseconds)\n" }
        if let id { text += "id: \(Self.oneLine(id))\n" }
        if let event { text += "event: \(Self.oneLine(event))\n" }
        if let data {
            // JSON, the usual data, has no line break: one line, without splitting it.
            if data.utf8.contains(where: { $0 == 10 || $0 == 13 }) {
                for line in data.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) { text += "data: \(line)\n" }
            } else {
                text += "data: \(data)\n"
            }
        }
        bytes = ByteBuffer(string: text + "\n")
    }

    private static func oneLine(_ text: String) -> String {
        text.utf8.contains(where: { $0 == 10 || $0 == 13 }) ? String(text.filter { !$0.isNewline }) : text
    }

    /// Pull now: the server may have missed something.
    package static let resync = ServerSentEvent(event: "resync", data: "{}")
    /// The server is going away: reconnect.
    package static let bye = ServerSentEvent(event: "bye", data: "{}")

    /// `{"token": …}`-style data: a JSON object of string fields.
    package static func json(_ fields: [String: String]) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}
