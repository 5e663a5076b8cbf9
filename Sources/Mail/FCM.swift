import AsyncHTTPClient
import BookwormCore
import Foundation
import JWTKit
import Metrics
import NIOCore

/// The assertion a service account signs to get an access token (RFC 7523).
package struct FCMAssertion: JWTPayload {
    package let iss: IssuerClaim
    package let scope: String
    package let aud: AudienceClaim
    package let iat: IssuedAtClaim
    package let exp: ExpirationClaim

    package init(iss: IssuerClaim, scope: String, aud: AudienceClaim, iat: IssuedAtClaim, exp: ExpirationClaim) {
        self.iss = iss
        self.scope = scope
        self.aud = aud
        self.iat = iat
        self.exp = exp
    }

    package func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// Firebase Cloud Messaging, HTTP v1: an OAuth access token from the service account (an RS256
/// assertion to its `token_uri`), kept until five minutes before it expires.
struct FCMSender: Sendable {
    static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    let settings: FCMSettings
    let tokens: ProviderToken
    let clock: any AppClock

    init(settings: FCMSettings, clock: any AppClock, http: HTTPClient, timeout: TimeAmount) throws {
        self.settings = settings
        self.clock = clock
        let account = settings.account
        let key = try Insecure.RSA.PrivateKey(pem: account.privateKey)
        let keys = JWTKeyCollection()
        self.tokens = ProviderToken(lifetime: 3600, clock: clock) { now in
            await keys.add(rsa: key, digestAlgorithm: .sha256)
            let assertion = try await keys.sign(FCMAssertion(
                iss: IssuerClaim(value: account.clientEmail), scope: Self.scope, aud: AudienceClaim(value: account.tokenURI),
                iat: IssuedAtClaim(value: now), exp: ExpirationClaim(value: now.addingTimeInterval(3600))))
            Counter(label: "bookworm_push_provider_tokens_total", dimensions: [("provider", "fcm")]).increment()
            return try await Self.exchange(assertion, at: account.tokenURI, http: http, timeout: timeout)
        }
    }

    private struct Grant: Decodable {
        let accessToken: String
        let expiresIn: Double
        enum CodingKeys: String, CodingKey { case accessToken = "access_token", expiresIn = "expires_in" }
    }

    private static func exchange(_ assertion: String, at tokenURI: String, http: HTTPClient,
                                 timeout: TimeAmount) async throws -> (token: String, lifetime: TimeInterval?) {
        var request = HTTPClientRequest(url: tokenURI)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        request.body = .bytes(ByteBuffer(string: "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"))
        let (status, _, body) = try await PushHTTP.execute(request, http: http, timeout: timeout)
        guard status == 200 else { throw PushTokenError(status: status) }
        let grant = try JSONDecoder().decode(Grant.self, from: body)
        return (grant.accessToken, max(60, grant.expiresIn - 300))
    }

    func send(_ push: PushJob, to device: PushJob.Device, http: HTTPClient, timeout: TimeAmount) async -> PushResult {
        var request = HTTPClientRequest(url: "\(settings.url)/v1/projects/\(settings.account.projectID)/messages:send")
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/json")
        request.body = .bytes(Self.body(push, token: device.token))
        return await PushHTTP.send(request, scheme: "Bearer", tokens: tokens, http: http, timeout: timeout) { status, headers, answer in
            let code = Self.errorCode(answer)
            switch (status, code) {
            case (_, "UNREGISTERED"): return .result(.gone)
            case (401, _): return .staleToken
            default: return .result(PushHTTP.classify(status: status, headers: headers, reason: code, now: clock.now()))
            }
        }
    }

    /// The message, written directly as the APNs payload is (JSONSerialization was most of a push's CPU there).
    static func body(_ push: PushJob, token: String) -> ByteBuffer {
        var json = JSONWriter(capacity: 512)
        json.object { root in
            root.key("message")
            root.object { message in
                if let collapse = push.collapseID {
                    message.key("android")
                    message.object { android in
                        android.key("collapse_key")
                        android.string(collapse)
                        android.key("priority")
                        android.string("high")
                    }
                    message.key("apns")
                    message.object { apns in
                        apns.key("headers")
                        apns.object { headers in
                            headers.key("apns-collapse-id")
                            headers.string(collapse)
                        }
                    }
                }
                message.key("data")
                push.writeData(to: &message)
                message.key("notification")
                push.writeAlert(to: &message)
                message.key("token")
                message.string(token)
            }
        }
        return json.withBytes { ByteBuffer(bytes: $0) }
    }

    /// FCM's error code (`UNREGISTERED`, `QUOTA_EXCEEDED`…) from an error answer's details.
    static func errorCode(_ body: Data) -> String {
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
              let error = object["error"] as? [String: Any] else { return "" }
        let details = error["details"] as? [[String: Any]] ?? []
        return details.compactMap { $0["errorCode"] as? String }.first ?? (error["status"] as? String ?? "")
    }
}

struct PushTokenError: Error, CustomStringConvertible {
    let status: Int
    var description: String { "the token endpoint answered \(status)" }
}
