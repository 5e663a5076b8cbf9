import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// The order and the budget of a live stream's writes in its connection's pipeline, on a
/// channel of its own: nothing before the response's head, what waited then in order, nothing
/// after the stream is finished, and a client that stops reading dropped, never buffered for.
@Suite struct LiveStreamWriterTests {
    let channel = EmbeddedChannel()
    let end = Gate()
    let writer: LiveStreamWriter

    init() throws {
        writer = LiveStreamWriter(end: end, channel: channel)
        try channel.pipeline.syncOperations.addHandler(writer)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
    }

    func written() throws -> [String] {
        var writes: [String] = []
        while let bytes = try channel.readOutbound(as: ByteBuffer.self) { writes.append(String(buffer: bytes)) }
        return writes
    }

    @Test func itsChunksGoBetweenTheEncodersHeadAndEndAsOneChunkedResponse() throws {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(HTTPResponseEncoder())
        try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
        let writer = LiveStreamWriter(end: Gate(), channel: channel)
        try LiveStreamWriter.place(writer, in: channel.pipeline.syncOperations)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
        try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok, headerFields: [.contentType: "text/event-stream"])))
        writer.start()
        writer.send(ServerSentEvent(event: "sync", data: #"{"token":"t"}"#).chunk)
        writer.send(ServerSentEvent(comment: "keep-alive").chunk)
        try channel.writeOutbound(HTTPResponsePart.end(nil))
        var response = ""
        while let bytes = try channel.readOutbound(as: IOData.self) {
            guard case .byteBuffer(let buffer) = bytes else { throw TestFailure("not a buffer") }
            response += String(buffer: buffer)
        }
        let headEnd = try #require(response.range(of: "\r\n\r\n"))
        #expect(response[..<headEnd.lowerBound].lowercased().contains("transfer-encoding: chunked"))
        let body = response[headEnd.upperBound...]
        #expect(body == "21\r\nevent: sync\ndata: {\"token\":\"t\"}\n\n\r\ne\r\n: keep-alive\n\n\r\n0\r\n\r\n")
    }

    @Test func eventsSentBeforeTheHeadWaitAndGoOutInOrderOnceStarted() throws {
        writer.send(ByteBuffer(string: "a"))
        writer.send(ByteBuffer(string: "b"))
        #expect(try written().isEmpty)
        writer.start()
        writer.send(ByteBuffer(string: "c"))
        #expect(try written() == ["a", "b", "c"])
    }

    @Test func aStreamClosedBeforeItStartedStillWritesItsLastEventAndNothingAfter() async throws {
        writer.send(ByteBuffer(string: "bye"))
        writer.finish()
        writer.send(ByteBuffer(string: "late"))
        await end.wait()
        writer.start()
        #expect(try written() == ["bye"])
    }

    @Test func aDroppedStreamWritesNothingAndClosesItsConnection() async throws {
        writer.send(ByteBuffer(string: "a"))
        writer.drop()
        await end.wait()
        writer.start()
        #expect(try written().isEmpty)
        #expect(!channel.isActive)
    }

    @Test func aClientThatStopsReadingIsStalledFromTheMomentItsChannelFills() throws {
        writer.start()
        #expect(!writer.isStalled(limit: .zero))
        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
        #expect(writer.isStalled(limit: .zero))
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        #expect(!writer.isStalled(limit: .zero))
    }

    @Test func aStreamIsDroppedPastTheCapWhileItsChannelIsFull() throws {
        writer.start()
        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
        let chunk = ByteBuffer(repeating: 0x61, count: 64 * 1024)
        for _ in 0..<(LiveStreamWriter.cap / chunk.readableBytes) { writer.send(chunk) }
        #expect(channel.isActive)
        #expect(try written().count == LiveStreamWriter.cap / chunk.readableBytes)
        writer.send(chunk)
        #expect(!channel.isActive)
    }

    @Test func aClientThatClosesItsSideIsDroppedAtOnce() async throws {
        writer.start()
        channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        await end.wait()
        #expect(!channel.isActive)
    }

    @Test func aClientThatClosedItsSideBeforeTheStreamStartedIsDroppedWhenItStarts() async throws {
        channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(channel.isActive)
        writer.start()
        await end.wait()
        #expect(!channel.isActive)
    }

    @Test func aWriterWhoseStreamNeverStartedLeavesThePipeline() throws {
        writer.leave()
        #expect(throws: (any Error).self) { try channel.pipeline.syncOperations.handler(type: LiveStreamWriter.self) }
    }

    @Test func aStartedStreamTakesTheRequestDecoderOutAndDiscardsWhatTheClientSends() throws {
        let channel = EmbeddedChannel()
        let pipeline = channel.pipeline.syncOperations
        try pipeline.configureHTTPServerPipeline(withErrorHandling: false)
        try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
        let writer = LiveStreamWriter(end: Gate(), channel: channel)
        try LiveStreamWriter.place(writer, in: pipeline)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
        writer.start()
        writer.leave()
        channel.embeddedEventLoop.run()
        #expect(throws: (any Error).self) { try pipeline.context(handlerType: ByteToMessageHandler<HTTPRequestDecoder>.self) }
        try channel.writeInbound(ByteBuffer(string: "GET /v1/me HTTP/1.1\r\nHost: x\r\n\r\n"))
        #expect(try channel.readInbound(as: HTTPRequestPart.self) == nil)
        #expect(try pipeline.handler(type: LiveStreamWriter.self) === writer)
    }

    @Test func beforeItStartsTheConnectionReadsRequestsAsBefore() throws {
        let channel = EmbeddedChannel()
        let pipeline = channel.pipeline.syncOperations
        try pipeline.configureHTTPServerPipeline(withErrorHandling: false)
        try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
        try LiveStreamWriter.place(LiveStreamWriter(end: Gate(), channel: channel), in: pipeline)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
        try channel.writeInbound(ByteBuffer(string: "GET /v1/me HTTP/1.1\r\nHost: x\r\n\r\n"))
        guard case .head(let head) = try channel.readInbound(as: HTTPRequestPart.self) else { throw TestFailure("no request head") }
        #expect(head.path == "/v1/me")
    }
}
