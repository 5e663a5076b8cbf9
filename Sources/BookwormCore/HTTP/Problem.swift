import Foundation
import HTTPTypes
import Hummingbird

/// The HTTP edge of `AppError`: its status, problem+json body and extra headers.
extension AppError {
    package var status: HTTPResponse.Status {
        switch self {
        case .validation, .malformedBody: .badRequest
        case .unauthorized: .unauthorized
        case .forbidden, .forbiddenBecause: .forbidden
        case .notFound: .notFound
        case .methodNotAllowed: .methodNotAllowed
        case .conflict, .invalidTransition, .busy: .conflict
        case .payloadTooLarge: .contentTooLarge
        case .unsupportedMediaType: .unsupportedMediaType
        case .expectationFailed: .expectationFailed
        case .unprocessable, .unprocessableBecause, .rule: .unprocessableContent
        case .gone: .gone
        case .throttled: .tooManyRequests
        case .overloaded, .unavailable, .databaseUnavailable, .contended: .serviceUnavailable
        }
    }

    static func tryAgain(in seconds: Int) -> String { seconds == 1 ? "Try again in 1 second" : "Try again in \(seconds) seconds" }

    /// One line for a person at a terminal (the admin commands).
    package var message: String { problem.detail }

    var problem: Problem {
        switch self {
        case .validation(let errors):
            let detail = errors.map { "\($0.field): \($0.message)" }.joined(separator: "; ")
            return Problem(type: "validation", title: "Invalid input", status: status, detail: detail, errors: errors)
        case .rule(let errors):
            let detail = errors.map { "\($0.field): \($0.message)" }.joined(separator: "; ")
            return Problem(type: "rule", title: "Request breaks a rule", status: status, detail: detail, errors: errors)
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
        case .busy(let code, let detail, _):
            return Problem(type: code, title: "Conflict", status: status, detail: detail)
        case .invalidTransition(let state, let action):
            var problem = Problem(type: "invalid_transition", title: "Conflict", status: status,
                                  detail: "\(action) is not allowed for you while the trade is \(state)")
            problem.state = state
            problem.action = action
            return problem
        case .payloadTooLarge(let limit):
            return Problem(type: "payload-too-large", title: "Request body too large", status: status,
                           detail: "The body exceeds the limit of \(limit) bytes")
        case .unsupportedMediaType(let detail):
            return Problem(type: "unsupported-media-type", title: "Unsupported media type", status: status, detail: detail)
        case .expectationFailed(let field, let detail):
            return Problem(type: "expectation-failed", title: "Expectation failed", status: status, detail: "\(field): \(detail)",
                           errors: [FieldError(field, detail)])
        case .unprocessable(let detail):
            return Problem(type: "unprocessable", title: "Unprocessable request", status: status, detail: detail)
        case .unprocessableBecause(let code, let detail, let field):
            return Problem(type: code, title: "Unprocessable request", status: status, detail: detail,
                           errors: field.map { [FieldError($0, detail)] })
        case .gone(let code, let detail, let field):
            return Problem(type: code, title: "Gone", status: status, detail: detail, errors: field.map { [FieldError($0, detail)] })
        case .throttled(let seconds):
            return Problem(type: "throttled", title: "Too many requests", status: status,
                           detail: Self.tryAgain(in: seconds))
        case .overloaded(let seconds):
            return Problem(type: "overloaded", title: "Service overloaded", status: status,
                           detail: Self.tryAgain(in: seconds))
        case .unavailable(let detail):
            return Problem(type: "unavailable", title: "Service unavailable", status: status, detail: detail)
        case .databaseUnavailable:
            return Problem(type: "database-unavailable", title: "Service unavailable", status: status,
                           detail: "The database is not answering right now; nothing was changed unless a retry shows it was. Try again shortly")
        case .contended:
            return Problem(type: "contended", title: "Service busy", status: status,
                           detail: "The request collided with others changing the same things, and nothing was changed. Try again")
        }
    }

    /// The problem's `detail`, for messages that quote an error outside HTTP (import reports).
    package var problemDetail: String { problem.detail }

    var extraHeaders: HTTPFields {
        switch self {
        case .throttled(let seconds), .overloaded(let seconds), .busy(_, _, let seconds):
            return [.retryAfter: String(max(1, seconds))]
        // Every 503 says when to come back: what it names is passing (a shutdown, a dependency).
        case .databaseUnavailable, .unavailable:
            return [.retryAfter: "2"]
        case .contended:
            return [.retryAfter: "1"]
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
    var type: String
    package var title: String
    package var status: Int
    var detail: String
    var errors: [FieldError]?
    /// Set for `invalid_transition`: the trade's state and the refused action.
    var state: String?
    var action: String?

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
