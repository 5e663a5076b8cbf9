import CSodium
import Hummingbird
import NIOCore
import Synchronization

/// The SHA-256 of a request body, taken as the body passes to whoever reads it, so that an
/// upload is hashed without being held whole in memory.
package final class RequestDigest: Sendable {
    package enum Progress: Sendable { case unread, partial, complete }
    private struct State {
        var hash = crypto_hash_sha256_state()
        var progress = Progress.unread
        var bytes = 0
        var result: [UInt8]?
    }
    private let state = Mutex(State())
    /// Past this many bytes reading fails with 413, whoever reads.
    let limit: Int

    init(limit: Int) {
        precondition(Sodium.ready)
        self.limit = limit
        state.withLock { _ = crypto_hash_sha256_init(&$0.hash) }
    }

    var progress: Progress { state.withLock { $0.progress } }
    /// The digest once the body has been read to its end.
    var value: [UInt8]? { state.withLock { $0.result } }

    /// `body` with every byte read through it added to the digest.
    func reading(_ body: RequestBody) -> RequestBody {
        RequestBody(asyncSequence: Digesting(base: body, digest: self))
    }

    /// Reads what nobody read of `body` (a `reading` body), for the digest.
    func readRest(of body: RequestBody) async throws -> [UInt8]? {
        guard progress == .unread else { return value }
        for try await _ in body {}
        return value
    }

    fileprivate func add(_ buffer: ByteBuffer) throws {
        let tooLarge = state.withLock { state -> Bool in
            state.progress = .partial
            state.bytes += buffer.readableBytes
            guard state.bytes <= limit else { return true }
            buffer.withUnsafeReadableBytes { bytes in
                _ = crypto_hash_sha256_update(&state.hash, bytes.bindMemory(to: UInt8.self).baseAddress, UInt64(bytes.count))
            }
            return false
        }
        if tooLarge { throw AppError.payloadTooLarge(limit: limit) }
    }

    fileprivate func finish() {
        state.withLock { state in
            guard state.result == nil else { return }
            var out = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
            _ = crypto_hash_sha256_final(&state.hash, &out)
            state.result = out
            state.progress = .complete
        }
    }

    private struct Digesting: AsyncSequence, Sendable {
        typealias Element = ByteBuffer
        let base: RequestBody
        let digest: RequestDigest

        struct AsyncIterator: AsyncIteratorProtocol {
            var base: RequestBody.AsyncIterator
            let digest: RequestDigest

            mutating func next() async throws -> ByteBuffer? {
                guard let buffer = try await base.next() else {
                    digest.finish()
                    return nil
                }
                try digest.add(buffer)
                return buffer
            }
        }

        func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base.makeAsyncIterator(), digest: digest) }
    }
}
