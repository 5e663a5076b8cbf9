import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// Outermost: gives the request its id (the caller's, if sane), applies per-request limits from
/// the configuration, and stamps `X-Request-Id` on every response.
package struct RequestSetupMiddleware: RouterMiddleware {
    package typealias Context = AppRequestContext
    package let maxBodyBytes: Int
    package let forwardedForHops: Int

    package init(maxBodyBytes: Int, forwardedForHops: Int) {
        self.maxBodyBytes = maxBodyBytes
        self.forwardedForHops = forwardedForHops
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        let incoming = request.headers[.xRequestID].flatMap { Self.isSafeID($0) ? $0 : nil }
        let id = incoming ?? RequestIDs.next()
        context.requestID = id
        context.maxBodyBytes = maxBodyBytes
        context.forwardedForHops = forwardedForHops
        context.logger[metadataKey: "request_id"] = .string(id)
        var response = try await next(request, context)
        response.headers[.xRequestID] = id
        return response
    }

    /// An echoed id must not smuggle anything into our headers or logs.
    static func isSafeID(_ value: String) -> Bool {
        !value.isEmpty && value.count <= 128 && value.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a)
                || byte == 0x2d || byte == 0x5f || byte == 0x2e
        }
    }
}

/// Ids for requests that came without one, shaped as a UUID (36 lowercase hex digits and
/// dashes). Foundation's `UUID()` opens, reads and closes `/dev/urandom` for each, three system
/// calls a request; these come from a counter instead, unique within the process, mixed through
/// a bijection keyed at random per process, so they are unique across processes too (but for a
/// 2^-64 chance) and do not count a server's requests for its clients.
enum RequestIDs {
    private static let keys = (UInt64.random(in: .min ... .max), UInt64.random(in: .min ... .max))
    private static let counter = Atomic<UInt64>(0)

    static func next() -> String {
        let serial = counter.add(1, ordering: .relaxed).newValue
        return format(high: keys.0, low: mix(serial &+ keys.1))
    }

    /// SplitMix64's finalizer: a bijection on 64 bits, so distinct serials stay distinct.
    static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xbf58476d1ce4e5b9
        z = (z ^ (z >> 27)) &* 0x94d049bb133111eb
        return z ^ (z >> 31)
    }

    /// The two words, high first, laid out as a UUID is (`apiString`).
    static func format(high: UInt64, low: UInt64) -> String {
        withUnsafeBytes(of: (high.bigEndian, low.bigEndian)) { UUID(uuid: $0.load(as: uuid_t.self)) }.apiString
    }
}

/// One structured line per request, after the response is known.
package struct AccessLogMiddleware: RouterMiddleware {
    package typealias Context = AppRequestContext
    package let logger: Logger

    package init(logger: Logger) {
        self.logger = logger
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        let elapsed = ContinuousClock.now - start
        let millis = Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000
        logger.info("request", metadata: [
            "request_id": .string(context.requestID),
            "method": .string(request.method.rawValue),
            "route": .string(context.endpointPath ?? "-"),
            "path": .string(request.uri.path),
            "status": .stringConvertible(response.status.code),
            "duration_ms": .stringConvertible((millis * 100).rounded() / 100),
            "client": .string(context.remoteAddress ?? "-"),
        ])
        return response
    }
}

/// Turns every error into `application/problem+json`. Errors we did not mean to raise are
/// logged in full and answered with a bland 500 so nothing internal leaks.
package struct ProblemMiddleware: RouterMiddleware {
    package typealias Context = AppRequestContext

    package init() {}

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            return try Self.problemResponse(for: error, request: request, context: context)
        }
    }

    static func problemResponse(for error: any Error, request: Request, context: Context) throws -> Response {
        switch error {
        case let error as AppError:
            return try error.response(from: request, context: context)
        case let error where DatabaseOutage.matches(error):
            context.logger.warning("database unavailable", metadata: ["error": .string(String(reflecting: error))])
            return try AppError.databaseUnavailable.response(from: request, context: context)
        case let error where TransactionConflict.matches(error):
            context.logger.warning("transaction conflict", metadata: ["error": .string(String(reflecting: error))])
            return try AppError.contended.response(from: request, context: context)
        case let error as HTTPParserError:
            // The body's framing is broken: what follows on this connection cannot be trusted, so
            // answer and close (Hummingbird reads no further request after a parser error).
            let appError = AppError.malformedBody("The request's HTTP framing is malformed (\(error))")
            var response = try appError.response(from: request, context: context)
            response.headers[.connection] = "close"
            return response
        case is NIOTooManyBytesError:
            return try AppError.payloadTooLarge(limit: context.maxBodyBytes).response(from: request, context: context)
        case let error as HTTPError where error.status == .notFound:
            let appError = AppError.notFound("No resource at \(request.method.rawValue) \(request.uri.path)")
            return try appError.response(from: request, context: context)
        case let error as HTTPError where error.status == .contentTooLarge:
            return try AppError.payloadTooLarge(limit: context.maxBodyBytes).response(from: request, context: context)
        case let error as any HTTPResponseError where error.status.code < 500:
            let problem = Problem(type: "http", title: error.status.reasonPhrase, status: error.status,
                                  detail: error.status.reasonPhrase)
            return try render(problem)
        default:
            context.logger.error("unhandled error", metadata: ["error": .string(String(reflecting: error))])
            let problem = Problem(type: "internal", title: "Internal server error", status: .internalServerError,
                                  detail: "Something went wrong on our side; the request id identifies it in our logs")
            return try render(problem)
        }
    }

    private static func render(_ problem: Problem) throws -> Response {
        let data = try JSONEncoder.api.encode(problem)
        return Response(
            status: .init(code: problem.status),
            headers: [.contentType: "application/problem+json"],
            body: .init(byteBuffer: ByteBuffer(bytes: data))
        )
    }
}

extension Router where Context == AppRequestContext {
    /// The trie router answers 404 for a known path with an unknown method; give every known
    /// path a 405 (with `Allow`) for the methods it does not serve. Call after adding routes.
    package func addMethodNotAllowedResponders() {
        var methodsByPath: [String: (path: RouterPath, methods: Set<String>)] = [:]
        for route in routes {
            let key = route.path.description
            methodsByPath[key, default: (route.path, [])].methods.insert(route.method.rawValue)
        }
        // QUERY (the safe method with a body) too: a client trying it hears 405, not 404.
        let candidates: [HTTPRequest.Method] = [.get, .post, .put, .patch, .delete, .options, .trace]
            + [HTTPRequest.Method("QUERY")].compactMap { $0 }
        for (_, entry) in methodsByPath {
            let served = entry.methods.contains("GET") ? entry.methods.union(["HEAD"]) : entry.methods
            let allowed = served.sorted()
            for method in candidates where !entry.methods.contains(method.rawValue) {
                on(entry.path, method: method) { _, _ -> Response in
                    throw AppError.methodNotAllowed(allowed: allowed)
                }
            }
        }
    }
}
