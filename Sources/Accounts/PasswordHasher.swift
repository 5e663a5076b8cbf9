import BookwormCore
import CSodium
import Foundation
import Metrics
import NIOPosix
import ServiceLifecycle
import Synchronization

/// Argon2id through libsodium, on its own small thread pool so hashing never blocks an event
/// loop. At most `concurrency` hashes run at once and at most `queueLimit` wait; past that the
/// caller gets `AppError.overloaded` (503 + Retry-After), so a login storm costs bounded memory:
/// `concurrency × memoryLimit` for the hashes, plus a few bytes per waiting request.
package final class PasswordHasher: Service, Sendable {
    package struct Settings: Sendable {
        /// OWASP's minimum for Argon2id is 19 MiB with t=2, p=1; that is our default.
        package var memoryLimitBytes: Int
        package var operationsLimit: Int
        package var concurrency: Int
        package var queueLimit: Int

        package init(
            memoryLimitBytes: Int = 19 * 1024 * 1024,
            operationsLimit: Int = 2,
            concurrency: Int = ProcessInfo.processInfo.activeProcessorCount,
            queueLimit: Int = 256
        ) {
            self.memoryLimitBytes = memoryLimitBytes
            self.operationsLimit = operationsLimit
            self.concurrency = concurrency
            self.queueLimit = queueLimit
        }

        /// The cheapest parameters libsodium accepts: for tests, never for production.
        static let fastForTests = Settings(memoryLimitBytes: 8 * 1024, operationsLimit: 1, concurrency: 2, queueLimit: 64)
    }

    package let settings: Settings
    private let pool: NIOThreadPool
    private let admission: Admission
    private let completed = Mutex(0)

    /// Argon2 computations finished so far (hashes and verifications alike).
    var completedCount: Int { completed.withLock { $0 } }
    /// Computations running at this moment, and the most that ever ran at once.
    private let running = Mutex((now: 0, peak: 0))
    var peakConcurrency: Int { running.withLock { $0.peak } }
    /// For `/metrics`: requests waiting for a hashing slot, and hashes running.
    package var load: (waiting: Int, running: Int) {
        let running = running.withLock { $0.now }
        return (max(0, admission.count - running), running)
    }
    /// A hash of a random password, verified against when the account does not exist so that
    /// an unknown login costs the same time as a wrong password.
    private let dummyHash: String

    package init(settings: Settings) throws {
        precondition(Sodium.ready)
        self.settings = settings
        self.pool = NIOThreadPool(numberOfThreads: settings.concurrency)
        self.admission = Admission(limit: settings.concurrency + settings.queueLimit, shedMetric: "bookworm_hash_shed_total")
        self.pool.start()
        self.dummyHash = try Self.hashNow(SecureRandom.base64URL(SecureRandom.bytes(24)), settings: settings)
    }

    package func run() async throws {
        try? await gracefulShutdown()
        try await pool.shutdownGracefully()
    }

    package func hash(_ password: String) async throws -> String {
        let settings = settings
        return try await admit { try Self.hashNow(password, settings: settings) }
    }

    /// Checks `password` against `hash`; with `hash == nil` (no such account) it checks against
    /// the dummy hash and returns false, taking the same time.
    package func verify(_ password: String, against hash: String?) async throws -> Bool {
        let target = hash ?? dummyHash
        let matches = try await admit { Self.verifyNow(password, hash: target) }
        return hash != nil && matches
    }

    /// True when `hash` was made with other parameters than the current ones.
    func needsRehash(_ hash: String) -> Bool {
        crypto_pwhash_str_needs_rehash(hash, UInt64(settings.operationsLimit), settings.memoryLimitBytes) != 0
    }

    private func admit<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await admission.run { try await pool.runIfActive {
            LowPriorityThread.lowerOnce()
            self.running.withLock { state in
                state.now += 1
                state.peak = max(state.peak, state.now)
            }
            defer {
                self.running.withLock { $0.now -= 1 }
                self.completed.withLock { $0 += 1 }
            }
            return try work()
        } }
    }

    package static func hashNow(_ password: String, settings: Settings) throws -> String {
        var out = [CChar](repeating: 0, count: Int(crypto_pwhash_STRBYTES))
        let length = UInt64(password.utf8.count)
        let status = password.withCString { chars in
            crypto_pwhash_str(&out, chars, length, UInt64(settings.operationsLimit), settings.memoryLimitBytes)
        }
        // libsodium fails only when it cannot allocate the memory limit.
        guard status == 0 else { throw AppError.overloaded(retryAfterSeconds: 1) }
        // The hash is ASCII, ended by a zero byte inside the buffer.
        return String(decoding: out.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func verifyNow(_ password: String, hash: String) -> Bool {
        let length = UInt64(password.utf8.count)
        return password.withCString { chars in crypto_pwhash_str_verify(hash, chars, length) == 0 }
    }
}
