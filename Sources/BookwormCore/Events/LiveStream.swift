import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import NIOCore
import ServiceLifecycle
import Synchronization

/// One Server-Sent Events response held open. Its events are written straight into its
/// connection's pipeline on the connection's event loop (`LiveStreamWriter`), already framed as
/// HTTP/1.1 chunks (`ServerSentEvent.chunk`), and a fan-out
/// hands each loop its streams' events in one go (`LiveStreams.send`): an event handed to the
/// response's task instead cost each stream a task switch and an async writer's hand-over on
/// top of the write. The response's task writes the head, waits for the stream to end, and
/// writes the end. Writes have a fixed budget: a client that stops reading fills its socket,
/// then the channel's buffer, and is dropped rather than buffered for.
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
    let loop: any EventLoop
    private let channel: any Channel
    private let writer: NIOLoopBoundBox<LiveStreamWriter>
    /// Opens when the stream ends.
    private let end: Gate

    init(id: UInt64, userID: UUID, sessionID: UUID, topic: Topic, channel: any Channel) {
        self.id = id
        self.userID = userID
        self.sessionID = sessionID
        self.topic = topic
        self.channel = channel
        loop = channel.eventLoop
        let end = Gate()
        self.end = end
        writer = .makeBoxSendingValue(LiveStreamWriter(end: end, channel: channel), as: LiveStreamWriter.self, eventLoop: channel.eventLoop)
    }

    /// Puts the stream's writer into its connection's pipeline, between the socket and the
    /// HTTP/1.1 response encoder, where its chunks follow the head the encoder wrote; what is
    /// sent before then waits in it. A pipeline without that encoder (not HTTP/1.1) gets no stream.
    func attach() async throws {
        let (writer, channel) = (writer, channel)
        try await loop.submit { try LiveStreamWriter.place(writer.value, in: channel.pipeline.syncOperations) }.get()
    }

    /// Writes `event` (on the stream's loop).
    package func send(_ event: ServerSentEvent) {
        onLoop { $0.send(event.chunk) }
    }

    /// Writes `bytes`; on the stream's loop only (`LiveStreams.send` hops there for many).
    func sendOnLoop(_ bytes: ByteBuffer) {
        writer.value.send(bytes)
    }

    /// Sends `last` (if any) and ends the response after it.
    package func close(with last: ServerSentEvent? = nil) {
        onLoop { writer in
            if let last { writer.send(last.chunk) }
            writer.finish()
        }
    }

    /// Takes the writer out of the connection's pipeline if its stream never started.
    func leave() {
        onLoop { $0.leave() }
    }

    /// Ends the connection at once: the response's task ends, and its end fails.
    func drop() {
        onLoop { $0.drop() }
    }

    /// Sends `comment`, or drops the stream (and calls `dropped`) when its client has not read
    /// for `limit`; on the stream's loop only (`LiveStreams.onLoops`).
    func beatOnLoop(_ comment: ServerSentEvent, limit: Duration, dropped: () -> Void) {
        let writer = writer.value
        if writer.isStalled(limit: limit) {
            writer.drop()
            dropped()
        } else {
            writer.send(comment.chunk)
        }
    }

    /// Runs `body` with the writer, on the loop (at once when already there). Ours, on a stream
    /// of ours: the loop's precondition holds.
    func onLoop(_ body: @escaping @Sendable (LiveStreamWriter) -> Void) {
        let writer = writer
        if loop.inEventLoop {
            body(writer.value)
        } else {
            loop.execute { body(writer.value) }
        }
    }

    /// The response's body: writes what waited for the head, then waits until the stream
    /// ends. The server's graceful shutdown ends it with `bye` (at once when the client is not
    /// reading: a `bye` behind a full socket would hold the shutdown up), and a cancelled task
    /// ends it too.
    func run() async {
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                onLoop { $0.start() }
                await end.wait()
            } onGracefulShutdown: {
                self.onLoop { writer in
                    if writer.isStalled(limit: .zero) {
                        writer.drop()
                    } else {
                        writer.send(ServerSentEvent.bye.chunk)
                        writer.finish()
                    }
                }
            }
        } onCancel: {
            self.drop()
        }
    }
}

/// One event in the `text/event-stream` format; a line break inside a value would start a new
/// field, so `data` is written as one `data:` line per line of it and the others have none.
/// It is kept framed as the HTTP/1.1 chunk it goes out as: a fan-out writes one shared buffer
/// to every stream instead of having the response encoder frame it once per stream.
package struct ServerSentEvent: Sendable {
    /// `<size in hex>\r\n<event>\r\n`.
    let chunk: ByteBuffer

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
        text += "\n"
        chunk = ByteBuffer(string: String(text.utf8.count, radix: 16) + "\r\n" + text + "\r\n")
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
