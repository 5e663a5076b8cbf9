import HummingbirdCore
import Logging
import NIOCore
import NIOPosix

/// Runs a task's jobs on one SwiftNIO event loop. Without it, every request crossed threads
/// four times (the loop read it, a cooperative-pool thread handled it, the database reply came
/// back on a loop and went to the pool again, the response went back to the loop), each a
/// wake-up and a context switch: 13–14 switches per nearby request (`perf`, 2026-11-27).
/// A handler on a loop holds up that loop's other connections while it computes, so work that
/// takes long (password hashing) runs on threads of its own, as before.
package final class LoopExecutor: TaskExecutor {
    let loop: any EventLoop

    init(_ loop: any EventLoop) {
        self.loop = loop
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        loop.execute { job.runSynchronously(on: executor) }
    }

    /// The loops of the group the HTTP server and PostgresNIO use unless told otherwise.
    package static let loops: [any EventLoop] = Array(MultiThreadedEventLoopGroup.singleton.makeIterator())

    private static let shared: [LoopExecutor] = loops.map(LoopExecutor.init)

    /// The executor of the loop this thread runs, if it is one of `loops`.
    package static var current: LoopExecutor? {
        MultiThreadedEventLoopGroup.currentEventLoop.flatMap(of)
    }

    package static func of(_ loop: any EventLoop) -> LoopExecutor? {
        shared.first { $0.loop === loop }
    }
}

/// The event loop of the background workers' database pools (jobs, pushes, mail), apart from the
/// HTTP loops: there, their replies were read and decoded beside requests, which waited behind
/// them (an import's file, 9 MiB of parts; a chunk's rows; alerts). `BookwormBench portability`, ten
/// imports at once: another user's `GET /v1/me` p99 while they were imported was 3.2-4.3 ms in five
/// runs, and 2.2-2.8 ms in four with this loop. One thread: the workers' I/O is light beside
/// requests', and a large reply (an import's file) holds up mail and pushes for milliseconds only.
package enum BackgroundLoop {
    package static let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    /// For a process that serves no requests (`bookworm worker`).
    package static var everyLoop: any EventLoopGroup { MultiThreadedEventLoopGroup.singleton }
}

/// HTTP/1.1 whose connection task (reading requests, writing responses, and the child tasks
/// that run handlers, `ChildTaskResponder`) prefers its channel's event loop.
struct LoopBoundHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value
    let inner: HTTP1Channel
    static let receiveBuffers = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65536)

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        // A channel keeps its last receive buffer for the next read, for as long as it is open:
        // NIO's first is 2 KiB, which an idle keep-alive connection or event stream holds for
        // nothing. A request head fits in 512 bytes; a larger read grows the next buffer.
        do {
            try channel.syncOptions?.setOption(ChannelOptions.recvAllocator, value: Self.receiveBuffers)
        } catch {
            logger.debug("the receive buffer could not be set", metadata: ["error": .string("\(error)")])
        }
        return inner.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        guard let executor = LoopExecutor.of(value.channel.eventLoop) else { return await inner.handle(value: value, logger: logger) }
        await withTaskExecutorPreference(executor) { await inner.handle(value: value, logger: logger) }
    }
}
