import AsyncHTTPClient
import BookwormCore
import Foundation
import JWTKit
import Metrics
import NIOCore

/// The claims of an APNs provider token: the team that signs, and when.
package struct APNsClaims: JWTPayload {
    package let iss: IssuerClaim
    package let iat: IssuedAtClaim

    package init(iss: IssuerClaim, iat: IssuedAtClaim) {
        self.iss = iss
        self.iat = iat
    }

    package func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// Apple's push service: HTTP/2 to `/3/device/<token>` with an ES256 provider token.
struct APNsSender: Sendable {
    let settings: APNsSettings
    let tokens: ProviderToken
    let clock: any AppClock

    init(settings: APNsSettings, clock: any AppClock) {
        self.settings = settings
        self.clock = clock
        let keys = JWTKeyCollection()
        let (key, keyID, teamID) = (settings.key, settings.keyID, settings.teamID)
        self.tokens = ProviderToken(lifetime: settings.tokenLifetime, clock: clock) { now in
            await keys.add(ecdsa: key, kid: JWKIdentifier(string: keyID))
            Counter(label: "bookworm_push_provider_tokens_total", dimensions: [("provider", "apns")]).increment()
            let token = try await keys.sign(APNsClaims(iss: IssuerClaim(value: teamID), iat: IssuedAtClaim(value: now)),
                                            kid: JWKIdentifier(string: keyID))
            return (token, nil)
        }
    }

    func send(_ push: PushJob, to device: PushJob.Device, http: HTTPClient, timeout: TimeAmount) async -> PushResult {
        let base = device.sandbox ? settings.sandboxURL : settings.url
        var request = HTTPClientRequest(url: "\(base)/3/device/\(device.token)")
        request.method = .POST
        request.headers.add(name: "apns-topic", value: settings.topic)
        request.headers.add(name: "apns-push-type", value: "alert")
        request.headers.add(name: "apns-priority", value: "10")
        request.headers.add(name: "content-type", value: "application/json")
        if let collapse = push.collapseID { request.headers.add(name: "apns-collapse-id", value: collapse) }
        request.body = .bytes(Self.body(push))
        return await PushHTTP.send(request, scheme: "bearer", tokens: tokens, http: http, timeout: timeout) { status, headers, answer in
            let reason = (try? JSONDecoder().decode([String: String].self, from: answer))?["reason"] ?? ""
            switch (status, reason) {
            // Not `DeviceTokenNotForTopic`: that is a wrong APNS_TOPIC, and would delete every iPhone.
            case (410, _), (400, "BadDeviceToken"): return .result(.gone)
            case (403, "ExpiredProviderToken"): return .staleToken
            default: return .result(PushHTTP.classify(status: status, headers: headers, reason: reason, now: clock.now()))
            }
        }
    }

    /// The alert and `data: {kind, id}`, written directly: with answers parsed only on errors, this took
    /// the worker from 2271 to 2556 pushes/s (`BookwormBench push`), JSONSerialization being the most of it.
    static func body(_ push: PushJob) -> ByteBuffer {
        var json = JSONWriter(capacity: 256)
        json.object { payload in
            payload.key("aps")
            payload.object { aps in
                aps.key("alert")
                push.writeAlert(to: &aps)
                aps.key("sound")
                aps.string("default")
            }
            payload.key("data")
            push.writeData(to: &payload)
        }
        return json.withBytes { ByteBuffer(bytes: $0) }
    }
}
