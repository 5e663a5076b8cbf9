import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// Outermost: gives the request its id (the caller's, if sane), applies per-request limits from
/// the configuration, and stamps `X-Request-Id` on every response.
struct RequestSetupMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let maxBodyBytes: Int
    let trustForwardedFor: Bool

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        let incoming = request.headers[.xRequestID].flatMap { Self.isSafeID($0) ? $0 : nil }
        let id = incoming ?? UUID().uuidString.lowercased()
        context.requestID = id
        context.maxBodyBytes = maxBodyBytes
        context.trustForwardedFor = trustForwardedFor
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

/// One structured line per request, after the response is known.
struct AccessLogMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        let elapsed = ContinuousClock.now - start
        let millis = Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000
        logger.info("request", metadata: [
            "request_id": .string(context.requestID),
            "method": .string(request.method.rawValue),
            "path": .string(request.uri.path),
            "status": .stringConvertible(response.status.code),
            "duration_ms": .string(String(format: "%.2f", millis)),
            "client": .string(context.remoteAddress ?? "-"),
        ])
        return response
    }
}

/// Turns every error into `application/problem+json`. Errors we did not mean to raise are
/// logged in full and answered with a bland 500 so nothing internal leaks.
struct ProblemMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
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
    func addMethodNotAllowedResponders() {
        var methodsByPath: [String: (path: RouterPath, methods: Set<String>)] = [:]
        for route in routes {
            let key = route.path.description
            methodsByPath[key, default: (route.path, [])].methods.insert(route.method.rawValue)
        }
        let candidates: [HTTPRequest.Method] = [.get, .post, .put, .patch, .delete]
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
