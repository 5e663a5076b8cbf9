import Foundation

/// One field-level complaint inside a validation problem.
package struct FieldError: Codable, Sendable, Equatable {
    var field: String
    package var message: String
    package init(_ field: String, _ message: String) {
        self.field = field
        self.message = message
    }
}

/// Runs one field check, keeping its validation errors instead of throwing them, so a client
/// hears about every bad field of a request at once.
package func collectFieldErrors<T>(_ errors: inout [FieldError], _ check: () throws -> T) throws -> T? {
    do {
        return try check()
    } catch AppError.validation(let fieldErrors) {
        errors += fieldErrors
        return nil
    } catch let error as AppError where error.isRule {
        throw error
    } catch {
        errors.append(FieldError("body", "\(error)"))
        return nil
    }
}

/// The domain errors stores and services throw: no HTTP type here. `Problem.swift` maps each case
/// to a status and an `application/problem+json` body, in that one place. Anything else that
/// escapes a handler is a logged 500.
package enum AppError: Error, Sendable, Equatable {
    case validation([FieldError])
    /// Well-formed fields that break a rule no schema can state (one of several, a checksum, a
    /// code that does not match): 422, so a 400 always means "the request breaks the schema".
    case rule([FieldError])
    case malformedBody(String)
    case unauthorized(code: String, detail: String)
    case forbidden(String)
    /// 403 with its own problem type, for refusals a client should tell apart.
    case forbiddenBecause(code: String, detail: String)
    case notFound(String)
    case methodNotAllowed(allowed: [String])
    case conflict(code: String, detail: String, field: String?)
    /// An action the current state (or this participant) does not allow: 409 carrying both.
    case invalidTransition(state: String, action: String)
    /// 409 with `Retry-After`: another request holds what this one needs, for a moment.
    case busy(code: String, detail: String, retryAfterSeconds: Int)
    case payloadTooLarge(limit: Int)
    case unsupportedMediaType(String)
    /// 417: an `Expect` header asking for what the server does not do.
    case expectationFailed(field: String, detail: String)
    case unprocessable(String)
    /// A 422 with its own problem type (`pin_required`), naming the field when there is one.
    case unprocessableBecause(code: String, detail: String, field: String?)
    /// 410 with its own problem type: what the client holds (a sync token) is too old to use.
    case gone(code: String, detail: String, field: String?)
    case throttled(retryAfterSeconds: Int)
    case overloaded(retryAfterSeconds: Int)
    case unavailable(String)
    /// PostgreSQL is away or too slow: the client should retry shortly.
    case databaseUnavailable
    /// The request's transaction kept colliding with others (`TransactionConflict`) and changed nothing.
    case contended

    package static func forbiddenCode(_ code: String, _ detail: String) -> AppError { .forbiddenBecause(code: code, detail: detail) }

    var isRule: Bool {
        if case .rule = self { return true }
        return false
    }

    package static func broken(_ field: String, _ message: String) -> AppError {
        .rule([FieldError(field, message)])
    }

    package static func invalid(_ field: String, _ message: String) -> AppError {
        .validation([FieldError(field, message)])
    }
}
