import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// Per-request state: the caller's session (set by `RequireSession`), the client address used
/// for throttling, and the request id echoed in `X-Request-Id`.
package struct AppRequestContext: RequestContext {
    package var coreContext: CoreRequestContextStorage
    let remoteAddress: String?
    /// The request's connection: a live stream closes it to drop a client that stopped reading.
    package let channel: any Channel
    package var session: AuthenticatedSession?
    var requestID: String = ""
    package var maxBodyBytes: Int = 1 << 20
    /// How many proxies in front of the server append to `X-Forwarded-For` (0: none is trusted).
    package var forwardedForHops = 0

    package init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress?.ipAddress
        self.channel = source.channel
    }

    /// Hummingbird's own decode limit, kept in step with ours.
    package var maxUploadSize: Int { maxBodyBytes }

    package func requireSession() throws -> AuthenticatedSession {
        guard let session else {
            throw AppError.unauthorized(code: "unauthorized", detail: "A valid bearer token is required")
        }
        return session
    }

    /// The address throttles are keyed by: the socket peer, or, behind `forwardedForHops`
    /// proxies that each append the peer they saw to `X-Forwarded-For`, the hop the outermost
    /// one added (counted from the right). Hops left of it are whatever the client sent, and
    /// would let it pick its address; fewer hops than proxies means the outer ones were bypassed.
    package func clientAddress(_ request: Request) -> String {
        if forwardedForHops > 0 {
            let hops = request.headers[values: .xForwardedFor].flatMap { $0.split(separator: ",") }
                .map { $0.trimmingCharacters(in: .whitespaces) }
            if let hop = hops.dropLast(forwardedForHops - 1).last ?? hops.first, !hop.isEmpty, hop.count <= 64 { return hop }
        }
        return remoteAddress ?? "unknown"
    }
}

extension HTTPField.Name {
    static let xRequestID = Self.constant("X-Request-Id")
    static let xForwardedFor = Self.constant("X-Forwarded-For")
}
