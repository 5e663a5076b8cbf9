import Foundation
import HTTPTypes
import Hummingbird
import JWTKit
import NIOCore

/// The claims APNs reads from a provider token.
struct ProviderTokenClaims: JWTPayload {
    let iss: IssuerClaim
    let iat: IssuedAtClaim
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// The claims Google's token endpoint reads from a service account's assertion.
struct AssertionClaims: JWTPayload {
    let iss: IssuerClaim
    let scope: String
    let aud: AudienceClaim
    let iat: IssuedAtClaim
    let exp: ExpirationClaim
    func verify(using algorithm: some JWTAlgorithm) async throws {
        try exp.verifyNotExpired()
    }
}

/// A request context that knows its connection, to count them.
struct FakeContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let connection: ObjectIdentifier

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        connection = ObjectIdentifier(source.channel.parent ?? source.channel)
    }
}

extension FakePushProvider {
    func router() -> Router<FakeContext> {
        let router = Router(context: FakeContext.self)
        router.post("3/device/:token") { request, context in try await self.apns(request, context, environment: "production") }
        router.post("sandbox/3/device/:token") { request, context in try await self.apns(request, context, environment: "sandbox") }
        router.post("token") { request, _ in try await self.grant(request) }
        router.post("v1/projects/:project/messages:send") { request, context in try await self.fcm(request, context) }
        return router
    }

    private func apns(_ request: Request, _ context: FakeContext, environment: String) async throws -> Response {
        let token = try context.parameters.require("token")
        state.withLockedValue { $0.connections.insert(context.connection); $0.attempts[token, default: 0] += 1 }
        guard let bearer = request.headers[.authorization], bearer.hasPrefix("bearer ") else {
            return refuse(403, "MissingProviderToken")
        }
        let jwt = String(bearer.dropFirst("bearer ".count))
        if !state.withLockedValue({ $0.providerTokens.contains(jwt) }) {
            // Verified once, as APNs does per connection: a signature is costly and the token is reused.
            guard let claims = try? await apnsKeys.verify(jwt, as: ProviderTokenClaims.self), claims.iss.value == teamID,
                  abs(claims.iat.value.timeIntervalSince(now())) < 3600 else {
                return refuse(403, "InvalidProviderToken")
            }
            state.withLockedValue { _ = $0.providerTokens.insert(jwt) }
        }
        guard request.headers[HTTPField.Name("apns-topic")!] == topic else { return refuse(400, "BadTopic") }
        guard request.headers[HTTPField.Name("apns-push-type")!] == "alert" else { return refuse(400, "InvalidPushType") }
        let body = try await request.body.collect(upTo: 4096)
        guard let object = try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any],
              let aps = object["aps"] as? [String: Any], let alert = aps["alert"] as? [String: String],
              let data = object["data"] as? [String: String] else { return refuse(400, "PayloadEmpty") }
        let push = Push(provider: "apns", environment: environment, token: token, title: alert["title"] ?? "", body: alert["body"] ?? "",
                        kind: data["kind"] ?? "", id: data["id"] ?? "", collapseID: request.headers[HTTPField.Name("apns-collapse-id")!])
        return try await answer(token, push) { status, reason in
            ByteBuffer(string: #"{"reason":"\#(reason)"}"#)
        }
    }

    private func grant(_ request: Request) async throws -> Response {
        let form = String(buffer: try await request.body.collect(upTo: 16384))
        var fields: [String: String] = [:]
        for pair in form.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? String($0) }
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        guard fields["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer", let assertion = fields["assertion"],
              let claims = try? await fcmKeys.verify(assertion, as: AssertionClaims.self), claims.iss.value == clientEmail,
              claims.aud.value.contains(tokenURI), claims.scope == "https://www.googleapis.com/auth/firebase.messaging",
              abs(claims.iat.value.timeIntervalSince(now())) < 3600 else {
            return refuse(400, "invalid_grant")
        }
        let token = "ya29.fake-\(UUID().uuidString)"
        state.withLockedValue { $0.accessTokens.insert(token); $0.grants += 1 }
        return Response(status: .ok, headers: [.contentType: "application/json"],
                        body: .init(byteBuffer: ByteBuffer(string: #"{"access_token":"\#(token)","expires_in":3599,"token_type":"Bearer"}"#)))
    }

    private func fcm(_ request: Request, _ context: FakeContext) async throws -> Response {
        guard try context.parameters.require("project") == projectID else { return refuse(404, "NOT_FOUND") }
        let bearer = request.headers[.authorization] ?? ""
        guard bearer.hasPrefix("Bearer "), state.withLockedValue({ $0.accessTokens.contains(String(bearer.dropFirst(7))) }) else {
            return Response(status: .unauthorized, body: .init(byteBuffer: ByteBuffer(string: #"{"error":{"code":401,"status":"UNAUTHENTICATED"}}"#)))
        }
        let body = try await request.body.collect(upTo: 8192)
        guard let object = try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any],
              let message = object["message"] as? [String: Any], let token = message["token"] as? String,
              let note = message["notification"] as? [String: String], let data = message["data"] as? [String: String] else {
            return refuse(400, "INVALID_ARGUMENT")
        }
        state.withLockedValue { $0.connections.insert(context.connection); $0.attempts[token, default: 0] += 1 }
        let android = message["android"] as? [String: Any]
        let push = Push(provider: "fcm", environment: "production", token: token, title: note["title"] ?? "", body: note["body"] ?? "",
                        kind: data["kind"] ?? "", id: data["id"] ?? "", collapseID: android?["collapse_key"] as? String)
        return try await answer(token, push) { status, reason in
            let code = reason == "UNREGISTERED" ? "NOT_FOUND" : "ERROR"
            return ByteBuffer(string: #"{"error":{"code":\#(status),"status":"\#(code)","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(reason)"}]}}"#)
        }
    }

    /// The scripted answer for `token` (200 once the script is used up); a 200 logs the push.
    private func answer(_ token: String, _ push: Push, error: (Int, String) -> ByteBuffer) async throws -> Response {
        let next = state.withLockedValue { state -> Answer in
            guard var answers = state.script[token], !answers.isEmpty else { return .ok }
            let first = answers.removeFirst()
            state.script[token] = answers
            return first
        }
        switch next {
        case .ok:
            state.withLockedValue { $0.received.append(push) }
            accepted.yield(push)
            return Response(status: .ok, headers: [HTTPField.Name("apns-id")!: UUID().uuidString])
        case .status(let status, let reason, let retryAfter):
            var headers: HTTPFields = [.contentType: "application/json"]
            if let retryAfter { headers[.retryAfter] = retryAfter }
            return Response(status: .init(code: status), headers: headers, body: .init(byteBuffer: error(status, reason)))
        case .silent:
            // No answer while the provider runs: the client gives up first.
            await withCheckedContinuation { request in
                let stopped = state.withLockedValue { state in
                    if !state.stopped { state.held.append(request) }
                    return state.stopped
                }
                if stopped { request.resume() }
            }
            return Response(status: .ok)
        }
    }

    private func refuse(_ status: Int, _ reason: String) -> Response {
        state.withLockedValue { $0.refusals.append("\(status) \(reason)") }
        return Response(status: .init(code: status), headers: [.contentType: "application/json"],
                        body: .init(byteBuffer: ByteBuffer(string: #"{"reason":"\#(reason)"}"#)))
    }
}
