import NIOCore
import NIOHTTP1

/// A live stream's place in its connection's pipeline, between the socket and the HTTP/1.1
/// response encoder, used on the connection's event loop only: its events, framed as chunks
/// already, go from here to the socket, after the response's head (which the response's task
/// writes through the encoder, before `start`) and before its end (which the task writes once
/// `end` opens).
///
/// A stream is its connection's last response (its head says `Connection: close`, and the
/// connection closes after its end): once it starts, the request decoder leaves the pipeline
/// with what it keeps for a next request (the parser, its settings, the last head's header
/// capacity: about 1.5 KiB of every open stream), and what the client sends is read and
/// discarded. A stream that never started leaves the pipeline instead (`leave`), and the
/// connection serves on.
final class LiveStreamWriter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    /// Bytes written while the channel holds more than its high-water mark (its client is not
    /// keeping up): past `budget` once that has lasted `stall`, or past `cap` whatever happens,
    /// the stream is dropped. A burst to a client that reads drains meanwhile.
    static let budget = 64 * 1024
    static let cap = 256 * 1024
    static let stall = TimeAmount.seconds(1)

    private let end: Gate
    private let channel: any Channel
    private var context: ChannelHandlerContext?
    /// What was sent before the head went out.
    private var waiting: [ByteBuffer] = []
    private var waitingBytes = 0
    private var started = false
    /// The client closed its side before the stream started.
    private var inputClosed = false
    /// Nothing more is written: the stream was closed or dropped.
    private var finished = false
    /// The channel's writability as its last change said (asking the channel costs more).
    private var writable = true
    private var unwritableSince: NIODeadline?
    private var unwritableBytes = 0

    init(end: Gate, channel: any Channel) {
        self.end = end
        self.channel = channel
    }

    /// Puts `writer` between the socket and `pipeline`'s HTTP/1.1 response encoder. A pipeline
    /// without that encoder (not HTTP/1.1) gets no stream.
    static func place(_ writer: LiveStreamWriter, in pipeline: ChannelPipeline.SynchronousOperations) throws {
        let encoder = try pipeline.context(handlerType: HTTPResponseEncoder.self)
        try pipeline.addHandler(writer, position: .before(encoder.handler))
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        writable = context.channel.isWritable
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    /// What the client sends on a started stream is discarded: it gets no other response on
    /// this connection. (The socket is still read, or its end would go unseen.)
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !started { context.fireChannelRead(data) }
    }

    /// A client that closes its side has gone (an event stream's client sends nothing after its
    /// request): the stream is dropped now, not at the first write that fails (up to a
    /// heartbeat later, with every such stream's connection held meanwhile).
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event as? ChannelEvent == .inputClosed {
            if started { drop() } else { inputClosed = true }
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// A client stalls from the moment its channel goes over the high-water mark, whether or not
    /// anything is written after that.
    func channelWritabilityChanged(context: ChannelHandlerContext) {
        writable = context.channel.isWritable
        if writable {
            unwritableSince = nil
            unwritableBytes = 0
        } else if unwritableSince == nil {
            unwritableSince = .now()
        }
        context.fireChannelWritabilityChanged()
    }

    func send(_ bytes: ByteBuffer) {
        guard !finished else { return }
        guard started, let context else {
            waiting.append(bytes)
            waitingBytes += bytes.readableBytes
            if waitingBytes > Self.cap { drop() }
            return
        }
        write(bytes, context)
    }

    /// The response's head has gone: what waited goes after it (also when the stream was
    /// closed meanwhile: its last event is among them).
    func start() {
        guard !started else { return }
        started = true
        let waiting = waiting
        self.waiting = []
        waitingBytes = 0
        guard let context else { return }
        if inputClosed { return drop() }
        let pipeline = context.pipeline.syncOperations
        if let decoder = try? pipeline.context(handlerType: ByteToMessageHandler<HTTPRequestDecoder>.self) {
            pipeline.removeHandler(context: decoder, promise: nil)
        }
        for bytes in waiting {
            guard context.channel.isActive else { return }
            write(bytes, context)
        }
    }

    /// Takes the writer out of the pipeline when its stream never started (its response failed
    /// before): the connection serves on. A started stream's writer stays until its connection closes.
    func leave() {
        guard !started, let context else { return }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    /// Nothing more goes out; the response's task writes the end, after which the connection
    /// closes, as Hummingbird closes a connection it quiesces (no other request is read on it).
    func finish() {
        finished = true
        context?.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        end.open()
    }

    /// Ends the connection at once.
    func drop() {
        finished = true
        waiting = []
        end.open()
        channel.close(promise: nil)
    }

    /// Whether the client has kept the channel over its high-water mark for longer than `limit`.
    func isStalled(limit: Duration) -> Bool {
        unwritableSince.map { NIODeadline.now() - $0 >= TimeAmount(limit) } ?? false
    }

    private func write(_ bytes: ByteBuffer, _ context: ChannelHandlerContext) {
        if !writable {
            let now = NIODeadline.now()
            let since = unwritableSince ?? now
            unwritableSince = since
            unwritableBytes += bytes.readableBytes
            if unwritableBytes > Self.cap || (unwritableBytes > Self.budget && now - since > Self.stall) { return drop() }
        }
        context.writeAndFlush(NIOAny(bytes), promise: nil)
    }
}
