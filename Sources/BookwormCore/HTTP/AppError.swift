import Foundation
import HTTPTypes
import Hummingbird

/// One field-level complaint inside a validation problem.
package struct FieldError: Codable, Sendable, Equatable {
    package var field: String
    package var message: String
    package init(_ field: String, _ message: String) {
        self.field = field
        self.message = message
    }
}

/// Runs one field check, keeping its validation errors instead of throwing them, so a client
/// hears about every bad field of a request at once.
package func collectFieldErrors<T>(_ errors: inout [FieldError], _ check: () throws -> T) -> T? {
    do {
        return try check()
    } catch AppError.validation(let fieldErrors) {
        errors += fieldErrors
        return nil
    } catch {
        errors.append(FieldError("body", "\(error)"))
        return nil
    }
}

/// Every error the API answers on purpose. Anything else that escapes a handler is a logged 500.
package enum AppError: Error, Sendable, Equatable {
    case validation([FieldError])
    case malformedBody(String)
    case unauthorized(code: String, detail: String)
    case forbidden(String)
    /// 403 with its own problem type, for refusals a client should tell apart.
    case forbiddenBecause(code: String, detail: String)
    case notFound(String)
    case methodNotAllowed(allowed: [String])
    case conflict(code: String, detail: String, field: String?)
    case payloadTooLarge(limit: Int)
    case unsupportedMediaType(String)
    case unprocessable(String)
    case throttled(retryAfterSeconds: Int)
    case overloaded(retryAfterSeconds: Int)
    case unavailable(String)

    package static func forbiddenCode(_ code: String, _ detail: String) -> AppError { .forbiddenBecause(code: code, detail: detail) }

    package static func invalid(_ field: String, _ message: String) -> AppError {
        .validation([FieldError(field, message)])
    }

    package var status: HTTPResponse.Status {
        switch self {
        case .validation, .malformedBody: .badRequest
        case .unauthorized: .unauthorized
        case .forbidden, .forbiddenBecause: .forbidden
        case .notFound: .notFound
        case .methodNotAllowed: .methodNotAllowed
        case .conflict: .conflict
        case .payloadTooLarge: .contentTooLarge
        case .unsupportedMediaType: .unsupportedMediaType
        case .unprocessable: .unprocessableContent
        case .throttled: .tooManyRequests
        case .overloaded, .unavailable: .serviceUnavailable
        }
    }

    var problem: Problem {
        switch self {
        case .validation(let errors):
            let detail = errors.map { "\($0.field): \($0.message)" }.joined(separator: "; ")
            return Problem(type: "validation", title: "Invalid input", status: status, detail: detail, errors: errors)
        case .malformedBody(let detail):
            return Problem(type: "malformed-body", title: "Malformed request body", status: status, detail: detail)
        case .unauthorized(let code, let detail):
            return Problem(type: code, title: "Unauthorized", status: status, detail: detail)
        case .forbidden(let detail):
            return Problem(type: "forbidden", title: "Forbidden", status: status, detail: detail)
        case .forbiddenBecause(let code, let detail):
            return Problem(type: code, title: "Forbidden", status: status, detail: detail)
        case .notFound(let detail):
            return Problem(type: "not-found", title: "Not found", status: status, detail: detail)
        case .methodNotAllowed(let allowed):
            return Problem(type: "method-not-allowed", title: "Method not allowed", status: status,
                           detail: "Allowed: \(allowed.joined(separator: ", "))")
        case .conflict(let code, let detail, let field):
            return Problem(type: code, title: "Conflict", status: status, detail: detail,
                           errors: field.map { [FieldError($0, detail)] })
        case .payloadTooLarge(let limit):
            return Problem(type: "payload-too-large", title: "Request body too large", status: status,
                           detail: "The body exceeds the limit of \(limit) bytes")
        case .unsupportedMediaType(let detail):
            return Problem(type: "unsupported-media-type", title: "Unsupported media type", status: status, detail: detail)
        case .unprocessable(let detail):
            return Problem(type: "unprocessable", title: "Unprocessable request", status: status, detail: detail)
        case .throttled(let seconds):
            return Problem(type: "throttled", title: "Too many requests", status: status,
                           detail: "Try again in \(seconds) seconds")
        case .overloaded(let seconds):
            return Problem(type: "overloaded", title: "Service overloaded", status: status,
                           detail: "Try again in \(seconds) seconds")
        case .unavailable(let detail):
            return Problem(type: "unavailable", title: "Service unavailable", status: status, detail: detail)
        }
    }

    var extraHeaders: HTTPFields {
        switch self {
        case .throttled(let seconds), .overloaded(let seconds):
            return [.retryAfter: String(max(1, seconds))]
        case .methodNotAllowed(let allowed):
            return [.allow: allowed.joined(separator: ", ")]
        case .unauthorized:
            return [.wwwAuthenticate: "Bearer"]
        default:
            return [:]
        }
    }
}

/// RFC 9457 problem details body.
package struct Problem: Encodable, Sendable {
    static let typeBase = "https://bookworm.example/problems/"
    package var type: String
    package var title: String
    package var status: Int
    package var detail: String
    package var errors: [FieldError]?

    package init(type: String, title: String, status: HTTPResponse.Status, detail: String, errors: [FieldError]? = nil) {
        self.type = Problem.typeBase + type
        self.title = title
        self.status = status.code
        self.detail = detail
        self.errors = errors
    }
}

extension AppError: HTTPResponseError {
    package func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = extraHeaders
        headers[.contentType] = "application/problem+json"
        let data = try JSONEncoder.api.encode(problem)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
