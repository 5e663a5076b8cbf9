#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypes
import Synchronization

/// How the HTTP server protects itself from clients that hold connections without using them.
package struct ConnectionPolicy: Sendable {
    /// A connection that completes no request part for this long is closed: idle keep-alive
    /// connections, and headers arriving too slowly (a request part exists only once its head is whole).
    package var idleTimeoutSeconds: Int = 30
    /// Open connections beyond this are answered 503 and closed at once, rather than left waiting
    /// in the accept queue or starving the process of file descriptors.
    package var maxConnections: Int = 4096

    package init(idleTimeoutSeconds: Int = 30, maxConnections: Int = 4096) {
        self.idleTimeoutSeconds = idleTimeoutSeconds
        self.maxConnections = maxConnections
    }

    /// The HTTP/1.1 server with the idle timeout and the connection cap.
    package func serverBuilder(logger: Logger) -> HTTPServerBuilder {
        let gate = ConnectionGate(limit: maxConnections, logger: logger)
        let configuration = HTTP1Channel.Configuration(
            additionalChannelHandlers: [ConnectionGateHandler(gate: gate)],
            idleTimeout: .seconds(Int64(idleTimeoutSeconds))
        )
        return HTTPServerBuilder { responder in
            LoopBoundHTTP1Channel(inner: HTTP1Channel(responder: responder, configuration: configuration))
        }
    }
}

/// The count of open connections, shared by every connection's handler.
package final class ConnectionGate: Sendable {
    let limit: Int
    let logger: Logger
    private let open = Atomic<Int>(0)

    init(limit: Int, logger: Logger) {
        self.limit = limit
        self.logger = logger
    }

    func admit() -> Bool {
        let (_, now) = open.add(1, ordering: .relaxed)
        if now > limit {
            open.subtract(1, ordering: .relaxed)
            return false
        }
        return true
    }

    func release() {
        open.subtract(1, ordering: .relaxed)
    }
}

/// Admits a connection if the gate has room; otherwise answers 503 with `Retry-After` and closes.
/// An admitted connection's handler leaves the pipeline when the channel becomes active: every
/// read would otherwise pass it, and every open connection (every event stream) would keep it.
/// (One added to a channel already active stays: NIO's server channels are not.)
final class ConnectionGateHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias OutboundOut = HTTPResponsePart

    private let gate: ConnectionGate
    private var decided = false
    private var refused = false

    init(gate: ConnectionGate) {
        self.gate = gate
    }

    /// The same problem body as any other overloaded answer, made once.
    static let refusal = ByteBuffer(bytes: (try? JSONEncoder.api.encode(AppError.overloaded(retryAfterSeconds: 1).problem)) ?? Data())

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { decide(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        decide(context: context)
        guard !refused else { return }
        context.fireChannelActive()
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !refused { context.fireChannelRead(data) }
    }

    private func decide(context: ChannelHandlerContext) {
        guard !decided else { return }
        decided = true
        guard gate.admit() else {
            refused = true
            gate.logger.warning("connection refused: at the connection limit", metadata: ["limit": .stringConvertible(gate.limit)])
            let body = Self.refusal
            let head = HTTPResponse(status: .serviceUnavailable, headerFields: [
                .connection: "close", .retryAfter: "1", .contentType: "application/problem+json",
                .contentLength: String(body.readableBytes),
            ])
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.write(wrapOutboundOut(.body(body)), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in context.close(promise: nil) }
            return
        }
        let gate = self.gate
        context.channel.closeFuture.whenComplete { _ in gate.release() }
    }
}

/// Raises the soft open-files limit to the hard one: every connection and every pooled database
/// connection is a descriptor, and distributions still default the soft limit to 1,024.
/// Returns the limit now in force.
package func raiseOpenFilesLimit() -> Int? {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
    if limit.rlim_cur < limit.rlim_max {
        var raised = limit
        raised.rlim_cur = limit.rlim_max
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
    }
    return limit.rlim_cur > rlim_t(Int.max) ? Int.max : Int(limit.rlim_cur)
}
