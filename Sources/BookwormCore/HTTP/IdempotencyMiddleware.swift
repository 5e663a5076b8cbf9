import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Synchronization

extension HTTPField.Name {
    package static let idempotencyKey = Self.constant("Idempotency-Key")
    package static let idempotentReplayed = Self.constant("Idempotent-Replayed")
}

/// `Idempotency-Key` on `POST`, `PUT`, `PATCH` and `DELETE` (API.md, "Safe retries"). The request
/// runs in a `HeldTransaction` that takes the key's lock as it begins and keeps the answer
/// before it commits, so the write and its answer are kept together or not at all. A retry
/// with the same key and the same method, target and body gets the kept answer with
/// `Idempotent-Replayed: true`; another request under the key is 422; a request refused before
/// any transaction, or ended by an error that undid its writes, keeps nothing and runs again for
/// real, as does one answered 5xx. A 2xx whose write was one statement committed on its own
/// (no `Database.transaction`) has its answer kept right after it, outside that write.
package struct IdempotencyMiddleware: RouterMiddleware {
    package typealias Context = AppRequestContext
    let store: IdempotencyStore
    let database: Database

    /// What a key's body may be read up to when the route does not read it: above every route's
    /// own limit (photos and imports take 10 MiB), which the route enforces when it reads.
    static let bodyLimit = 16 << 20
    /// Answers larger than this are not kept for replay (writes answer a few kilobytes).
    static let answerLimit = 1 << 20
    /// The methods that write, and so take a key (and answer with a `Sync-Token`).
    package static let writes: Set<HTTPRequest.Method> = [.post, .put, .patch, .delete]

    package init(store: IdempotencyStore, database: Database) {
        self.store = store
        self.database = database
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard Self.writes.contains(request.method), let header = request.headers[.idempotencyKey] else {
            return try await next(request, context)
        }
        let key = try Self.key(header)
        let scope = IdempotencyScope(user: context.session?.user.id, address: context.clientAddress(request))
        let digest = RequestDigest(limit: Self.bodyLimit)
        var request = request
        request.body = digest.reading(request.body)
        let target = request.uri.description
        if let kept = try await store.find(scope, key: key) {
            return try await Self.replay(kept, method: request.method.rawValue, target: target, hash: digest.readRest(of: request.body))
        }
        let store = store
        let held = HeldTransaction(claim: { connection, logger in try await store.claim(scope, key: key, on: connection, logger: logger) })
        do {
            return try await run(next, held: held, scope: scope, key: key, request: request, digest: digest, context: context)
        } catch {
            // Whatever failed, the held connection goes back (a no-op once committed or never begun).
            await held.rollback(logger: context.logger)
            throw error
        }
    }

    /// The route inside `held`, then the answer kept with its writes, or nothing kept.
    private func run(_ next: (Request, Context) async throws -> Response, held: HeldTransaction, scope: IdempotencyScope, key: String,
                     request: Request, digest: RequestDigest, context: Context) async throws -> Response {
        var response: Response
        do {
            response = try await HeldTransaction.$current.withValue(held) { try await next(request, context) }
        } catch is IdempotencyStore.Taken {
            return try await replayTaken(scope: scope, key: key, request: request, digest: digest)
        } catch {
            // Rendered here, so that the answer kept is the answer sent.
            response = try ProblemMiddleware.problemResponse(for: error, request: request, context: context)
        }
        // A 2xx without the held transaction wrote in a statement of its own (or not at all):
        // its answer is still kept, just after it (`keepAlone`), so that a retry replays it.
        guard held.isOpen || (200..<300).contains(response.status.code) else { return response }
        guard response.status.code < 500 else {
            await held.rollback(logger: context.logger)
            return response
        }
        return try await commit(held, response: response, scope: scope, key: key, request: request, digest: digest, context: context)
    }

    /// Keeps the answer in the write's transaction and commits both.
    private func commit(_ held: HeldTransaction, response: Response, scope: IdempotencyScope, key: String, request: Request,
                        digest: RequestDigest, context: Context) async throws -> Response {
        var response = response
        let hash: [UInt8]
        do {
            guard digest.progress != .partial, let value = try await digest.readRest(of: request.body) else {
                throw UnreadBody()
            }
            hash = value
        } catch {
            // Committed on its own already: nothing to undo, and nothing is kept.
            guard held.isOpen else { return response }
            await held.rollback(logger: context.logger)
            if error is UnreadBody { context.logger.error("a keyed write stopped reading its body and still wrote; rolled back") }
            return try ProblemMiddleware.problemResponse(for: error, request: request, context: context)
        }
        let body = try await Self.collect(response.body)
        response.body = ResponseBody(byteBuffer: body)
        // An answer with a session token keeps neither its body nor the request's hash: a body
        // holding a password must not leave a fast hash of it in the database.
        let secret = response.headers[.cacheControl]?.contains("no-store") == true
        let answer = KeptAnswer(
            method: request.method.rawValue, target: request.uri.description, requestHash: secret ? [] : hash,
            status: Int(response.status.code), contentType: response.headers[.contentType], location: response.headers[.location],
            etag: response.headers[.eTag], body: secret || body.readableBytes > Self.answerLimit ? nil : body)
        let store = store
        do {
            guard held.isOpen else {
                await keepAlone(answer, scope: scope, key: key, logger: context.logger)
                return response
            }
            try await held.commit(on: database, logger: context.logger) { connection in
                try await store.keep(answer, scope: scope, key: key, on: connection, logger: context.logger)
            }
        } catch is IdempotencyStore.Taken {
            return try await replayTaken(scope: scope, key: key, request: request, digest: digest)
        }
        return response
    }

    private struct UnreadBody: Error {}

    /// The answer of a write that committed on its own, kept in a transaction of its own just
    /// after it. Nothing is kept while another request holds the key, nor once one has kept it:
    /// both ran the same write. The write stands whatever happens here, so its answer is sent.
    private func keepAlone(_ answer: KeptAnswer, scope: IdempotencyScope, key: String, logger: Logger) async {
        let store = store
        do {
            try await database.transaction(logger: logger) { connection in
                guard try await store.lock(scope, key: key, on: connection, logger: logger) else { return }
                try await store.keep(answer, scope: scope, key: key, on: connection, logger: logger)
            }
        } catch is IdempotencyStore.Taken {
        } catch {
            logger.warning("the answer of a keyed write was not kept", metadata: ["error": .string(String(reflecting: error))])
        }
    }

    /// The key was kept by another request while this one ran (its work is rolled back): its
    /// answer when this request's body is known in full, else 409 so the client asks again.
    private func replayTaken(scope: IdempotencyScope, key: String, request: Request, digest: RequestDigest) async throws -> Response {
        if digest.progress != .partial, let hash = try await digest.readRest(of: request.body),
           let kept = try await store.find(scope, key: key) {
            return try Self.replay(kept, method: request.method.rawValue, target: request.uri.description, hash: hash)
        }
        throw AppError.busy(code: "idempotency_in_progress",
                            detail: "A request with this Idempotency-Key has just finished; try again", retryAfterSeconds: 1)
    }

    static func replay(_ kept: KeptAnswer, method: String, target: String, hash: [UInt8]?) throws -> Response {
        guard let body = kept.body else {
            throw AppError.conflict(
                code: "idempotency_not_replayable",
                detail: "The first answer under this Idempotency-Key is not kept for replay (it carried a session token, or was too large): "
                    + "sign in again, or read the object", field: "Idempotency-Key")
        }
        guard kept.method == method, kept.target == target, let hash, hash == kept.requestHash else {
            throw AppError.unprocessableBecause(code: "idempotency_key_reused",
                                                detail: "This Idempotency-Key was used for another request: choose a new key",
                                                field: "Idempotency-Key")
        }
        var headers: HTTPFields = [.idempotentReplayed: "true"]
        headers[.contentType] = kept.contentType
        headers[.location] = kept.location
        headers[.eTag] = kept.etag
        if kept.contentType != nil { headers[.cacheControl] = "private, no-cache" }
        return Response(status: HTTPResponse.Status(code: kept.status), headers: headers, body: ResponseBody(byteBuffer: body))
    }

    /// 1–255 visible ASCII characters; the IETF draft's structured-field string form
    /// (in double quotes) is read too.
    static func key(_ header: String) throws -> String {
        var value = Substring(header)
        if value.count >= 2, value.first == "\"", value.last == "\"" { value = value.dropFirst().dropLast() }
        guard (1...255).contains(value.utf8.count), value.utf8.allSatisfy({ (0x21...0x7e).contains($0) }) else {
            throw AppError.invalid("Idempotency-Key", "must be 1 to 255 visible ASCII characters")
        }
        return String(value)
    }

    static func collect(_ body: ResponseBody) async throws -> ByteBuffer {
        let collected = Collected()
        try await body.write(Collector(collected: collected))
        return collected.buffer.withLock { $0 }
    }

    private final class Collected: Sendable {
        let buffer = Mutex(ByteBuffer())
    }

    private struct Collector: ResponseBodyWriter {
        let collected: Collected
        mutating func write(_ part: ByteBuffer) async throws {
            collected.buffer.withLock { buffer in
                var part = part
                buffer.writeBuffer(&part)
            }
        }
        consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }
}
