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
    package var trustForwardedFor = false

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

    /// The address throttles are keyed by: the socket peer, or, when the operator said a proxy
    /// sets it, the last `X-Forwarded-For` hop. That is the one the proxy added (the peer it
    /// saw); hops before it are whatever the client sent, and would let it pick its address.
    package func clientAddress(_ request: Request) -> String {
        if trustForwardedFor, let forwarded = request.headers[values: .xForwardedFor].last {
            let last = forwarded.split(separator: ",").last.map { $0.trimmingCharacters(in: .whitespaces) }
            if let last, !last.isEmpty, last.count <= 64 { return last }
        }
        return remoteAddress ?? "unknown"
    }
}

extension HTTPField.Name {
    static let xRequestID = Self("X-Request-Id")!
    static let xForwardedFor = Self("X-Forwarded-For")!
}
