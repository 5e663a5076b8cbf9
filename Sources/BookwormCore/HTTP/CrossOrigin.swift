import Foundation
import HTTPTypes
import Hummingbird

/// The web origins whose pages may call the API from a browser (`BOOKWORM_CORS_ORIGINS`): a web
/// client served from another origin than the API can only read its answers when the API says
/// so. Sessions are bearer tokens a page sends itself, never cookies, so an allowed origin gains
/// nothing a page could not do with a token it already holds; the list only decides which pages
/// may use the API at all. Unset: no cross-origin header is ever sent (same-origin deployments
/// and native apps need none).
package struct CrossOriginPolicy: Sendable, Equatable {
    package enum Allowed: Sendable, Equatable {
        case none
        /// `*`: any page (answers carry `Access-Control-Allow-Origin: *`).
        case any
        /// Exact origins, as browsers write them (`https://app.example.org`, lower case, the
        /// scheme's default port left out).
        case only(Set<String>)
    }

    package var allowed: Allowed

    package init(allowed: Allowed = .none) {
        self.allowed = allowed
    }

    /// A comma-separated list of origins (`scheme://host[:port]`, http or https, nothing after
    /// the authority), or `*`; an entry that is not an origin is an error naming `variable`.
    package init(variable: String, value: String?) throws {
        let entries = (value ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        if entries.isEmpty {
            allowed = .none
        } else if entries == ["*"] {
            allowed = .any
        } else {
            allowed = .only(Set(try entries.map { entry in
                guard let origin = Self.origin(entry) else {
                    throw ConfigError(variable: variable, message: "expected origins such as https://app.example.org (or *), got '\(entry)'")
                }
                return origin
            }))
        }
    }

    /// `text` as a browser serialises an origin, or nil when it is not one.
    static func origin(_ text: String) -> String? {
        guard let parts = URLComponents(string: text), let scheme = parts.scheme?.lowercased(), ["http", "https"].contains(scheme),
              let host = parts.host?.lowercased(), !host.isEmpty, parts.user == nil, parts.password == nil,
              parts.path.isEmpty, parts.query == nil, parts.fragment == nil else { return nil }
        let defaultPort = scheme == "https" ? 443 : 80
        let port = parts.port.flatMap { $0 == defaultPort ? nil : $0 }.map { ":\($0)" } ?? ""
        return "\(scheme)://\(host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host)\(port)"
    }

    /// The `Access-Control-Allow-Origin` value for a request from `origin` (nil: none sent), nil
    /// when refused. Under `*` every answer says so, Origin or not, so that a shared cache never
    /// keeps one without it.
    func allowOrigin(for origin: String?) -> String? {
        switch allowed {
        case .none: nil
        case .any: "*"
        case .only(let origins): origin.flatMap { origins.contains($0) ? $0 : nil }
        }
    }
}

/// Answers browsers' preflight requests (`OPTIONS` with `Access-Control-Request-Method`) and
/// marks every answer to an allowed origin as readable by it, errors included, so a web client
/// reads a problem's `detail` as a native one does. Outside the problem middleware for that
/// reason; it renders its own refusal.
package struct CrossOriginMiddleware: RouterMiddleware {
    package typealias Context = AppRequestContext
    let policy: CrossOriginPolicy

    package init(policy: CrossOriginPolicy) {
        self.policy = policy
    }

    static let methods = "GET, HEAD, POST, PUT, PATCH, DELETE"
    static let requestHeaders = "Authorization, Content-Type, Idempotency-Key, If-None-Match, X-Request-Id"
    /// What a page may read beyond the basic headers: revalidation, where a new object lives,
    /// when to retry, whether an answer is a replay, and the id to quote in a bug report.
    static let exposedHeaders = "ETag, Idempotent-Replayed, Location, Retry-After, X-Request-Id"
    /// Seconds a browser may reuse a preflight's answer.
    static let maxAge = "600"

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if policy.allowed == .none { return try await next(request, context) }
        let origin = request.headers[.origin]
        let allowOrigin = policy.allowOrigin(for: origin)
        if request.method == .options, let origin, request.headers[.accessControlRequestMethod] != nil {
            guard let allowOrigin else {
                let refusal = AppError.forbiddenBecause(code: "origin_not_allowed",
                                                        detail: "Pages from \(origin) may not call this API (BOOKWORM_CORS_ORIGINS)")
                return try stamped(refusal.response(from: request, context: context), allowOrigin: nil)
            }
            var response = Response(status: .noContent)
            response.headers[.accessControlAllowMethods] = Self.methods
            response.headers[.accessControlAllowHeaders] = Self.requestHeaders
            response.headers[.accessControlMaxAge] = Self.maxAge
            return stamped(response, allowOrigin: allowOrigin)
        }
        return stamped(try await next(request, context), allowOrigin: allowOrigin)
    }

    /// Every answer varies by `Origin` under a list (a shared cache must not hand one origin's
    /// answer to another); an allowed origin's also says it may read it.
    private func stamped(_ response: Response, allowOrigin: String?) -> Response {
        var response = response
        if case .only = policy.allowed { response.headers.append(HTTPField(name: .vary, value: "Origin")) }
        if let allowOrigin {
            response.headers[.accessControlAllowOrigin] = allowOrigin
            response.headers[.accessControlExposeHeaders] = Self.exposedHeaders
        }
        return response
    }
}
