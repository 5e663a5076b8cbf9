import Crypto
import CryptoExtras
import Foundation
import Hummingbird
import HummingbirdHTTP2
import HummingbirdTLS
import JWTKit
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// Apple's push service and Firebase Cloud Messaging, played by the tests and the benchmark:
/// one HTTP/2-only TLS server with a certificate made for the run. It checks what the real
/// ones check (APNs: the provider token's ES256 signature, `kid`, `iss`, `iat`, the topic and
/// the push type; FCM: the RS256 assertion at its token endpoint, then the bearer token), logs
/// every push it accepts, and answers as the test scripts it.
package final class FakePushProvider: Sendable {
    /// A push as the provider received it.
    package struct Push: Sendable, Equatable {
        package let provider: String
        package let environment: String
        package let token: String
        package let title: String
        package let body: String
        package let kind: String
        package let id: String
        package let collapseID: String?
    }

    /// What the provider answers one push.
    package enum Answer: Sendable {
        case ok
        case status(Int, reason: String, retryAfter: String? = nil)
        /// No answer until long after the client gave up.
        case silent
    }

    struct State {
        var script: [String: [Answer]] = [:]
        var received: [Push] = []
        var refusals: [String] = []
        var attempts: [String: Int] = [:]
        var providerTokens: Set<String> = []
        var accessTokens: Set<String> = []
        var grants = 0
        var connections: Set<ObjectIdentifier> = []
        /// Silent answers, held until the provider stops.
        var held: [CheckedContinuation<Void, Never>] = []
        var stopped = false
    }

    package let keyID = "KEY4TESTS1"
    package let teamID = "TEAM4TESTS"
    package let topic = "org.bookworm.tests"
    package let projectID = "bookworm-tests"
    package let clientEmail = "push@bookworm-tests.iam.gserviceaccount.com"
    /// Apple's .p8 and Google's service-account JSON, as an operator would have them.
    package let keyFile: String
    package let serviceAccountFile: String
    package let caFile: String
    private let bound = NIOLockedValueBox(0)
    package var port: Int { bound.withLockedValue { $0 } }
    package var url: String { "https://127.0.0.1:\(port)" }
    package var sandboxURL: String { "\(url)/sandbox" }
    package var tokenURI: String { "\(url)/token" }

    let state = NIOLockedValueBox(State())
    /// Every push accepted, as it is (`fake-push` prints them).
    package let pushes: AsyncStream<Push>
    let accepted: AsyncStream<Push>.Continuation
    let apnsKeys: JWTKeyCollection
    let fcmKeys: JWTKeyCollection
    /// The time `iat` is checked against: the app's clock.
    let now: @Sendable () -> Date
    private let task = NIOLockedValueBox<Task<Void, any Error>?>(nil)

    private init(directory: URL, now: @escaping @Sendable () -> Date) async throws {
        self.now = now
        (pushes, accepted) = AsyncStream.makeStream(of: Push.self, bufferingPolicy: .bufferingNewest(10_000))
        let apnsKey = try ES256PrivateKey(backing: P256.Signing.PrivateKey())
        keyFile = directory.appendingPathComponent("AuthKey.p8").path
        try Data(apnsKey.pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyFile))
        apnsKeys = JWTKeyCollection()
        await apnsKeys.add(ecdsa: apnsKey.publicKey, kid: JWKIdentifier(string: keyID))
        let rsa = try Insecure.RSA.PrivateKey(backing: _RSA.Signing.PrivateKey(keySize: .bits2048))
        fcmKeys = JWTKeyCollection()
        await fcmKeys.add(rsa: rsa.publicKey, digestAlgorithm: .sha256)
        serviceAccountFile = directory.appendingPathComponent("service-account.json").path
        caFile = directory.appendingPathComponent("ca.pem").path
        // Written once the server listens: the token URI names its port.
        rsaPEM = rsa.pemRepresentation
    }
    private let rsaPEM: String

    /// Starts the provider on a port of its own; `now` is the clock the tokens' `iat` must fit.
    package static func start(now: @escaping @Sendable () -> Date = Date.init) async throws -> FakePushProvider {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fake-push-\(UUID().uuidString)")
        let certificates = try TestCertificates.make(in: directory)
        let fake = try await FakePushProvider(directory: directory, now: now)
        var quiet = Logger(label: "fake-push")
        quiet.logLevel = .critical
        let (ports, listening) = AsyncStream.makeStream(of: Int.self)
        let app = Application(router: fake.router(), server: try .tls(.plaintextHTTP2(), tlsConfiguration: certificates.serverConfiguration),
                              configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                              onServerRunning: { channel in
                                  listening.yield(channel.localAddress?.port ?? 0)
                                  listening.finish()
                              }, logger: quiet)
        fake.task.withLockedValue { $0 = Task { defer { listening.finish() }; try await app.runService(gracefulShutdownSignals: []) } }
        var bound = ports.makeAsyncIterator()
        guard let port = await bound.next(), port > 0 else { throw FakePushError("the fake push provider did not start") }
        fake.bound.withLockedValue { $0 = port }
        let account = ["type": "service_account", "project_id": fake.projectID, "client_email": fake.clientEmail,
                       "private_key": fake.rsaPEM, "token_uri": fake.tokenURI]
        try JSONSerialization.data(withJSONObject: account).write(to: URL(fileURLWithPath: fake.serviceAccountFile))
        return fake
    }

    /// The variables an operator sets to push through this provider (README, Push notifications).
    package var environment: [String: String] {
        ["APNS_KEY_FILE": keyFile, "APNS_KEY_ID": keyID, "APNS_TEAM_ID": teamID, "APNS_TOPIC": topic, "APNS_URL": url,
         "APNS_SANDBOX_URL": sandboxURL, "APNS_CA_FILE": caFile, "FCM_SERVICE_ACCOUNT_FILE": serviceAccountFile, "FCM_URL": url,
         "BOOKWORM_PUSH_TIMEOUT_SECONDS": "10"]
    }

    package func stop() {
        let held = state.withLockedValue { state in
            state.stopped = true
            defer { state.held = [] }
            return state.held
        }
        for request in held { request.resume() }
        accepted.finish()
        task.withLockedValue { $0?.cancel() }
    }

    /// The next answers to pushes for `token`, in order; once they are used up, 200.
    package func script(_ token: String, _ answers: [Answer]) {
        state.withLockedValue { $0.script[token, default: []] += answers }
    }

    /// Every access token FCM issued so far stops working (as when one expires early).
    package func expireAccessTokens() {
        state.withLockedValue { $0.accessTokens = [] }
    }

    package var received: [Push] { state.withLockedValue { $0.received } }
    /// Requests refused for a broken signature, claim, topic or header: a correct client makes none.
    package var refusals: [String] { state.withLockedValue { $0.refusals } }
    /// Tries per device token, answered or not.
    package func attempts(_ token: String) -> Int { state.withLockedValue { $0.attempts[token] ?? 0 } }
    /// Distinct provider tokens APNs saw; access tokens FCM granted.
    package var providerTokensSeen: Int { state.withLockedValue { $0.providerTokens.count } }
    package var grants: Int { state.withLockedValue { $0.grants } }
    /// TCP connections that carried requests.
    package var connections: Int { state.withLockedValue { $0.connections.count } }
}

package struct FakePushError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
