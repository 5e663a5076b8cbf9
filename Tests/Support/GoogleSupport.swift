
import CryptoExtras
import Foundation
import Hummingbird
import JWTKit
import Logging
import NIOConcurrencyHelpers
@testable import BookwormCore

/// Google, played by the test: an RSA key of its own, ID tokens signed with it, and its public
/// half served as a JWKS by a real HTTP server on loopback, which counts its fetches.
final class FakeGoogle: Sendable {
    static let clientID = "bookworm-test.apps.googleusercontent.com"
    let port: Int
    private let keys: NIOLockedValueBox<[(kid: String, key: JWTKit.Insecure.RSA.PrivateKey)]>
    private let served: NIOLockedValueBox<(kids: [String], fetches: Int)>
    private let task: Task<Void, any Error>

    var jwksURL: String { "http://127.0.0.1:\(port)/certs" }
    var fetches: Int { served.withLockedValue { $0.fetches } }

    private init(port: Int, task: Task<Void, any Error>, keys: NIOLockedValueBox<[(kid: String, key: JWTKit.Insecure.RSA.PrivateKey)]>,
                 served: NIOLockedValueBox<(kids: [String], fetches: Int)>) {
        self.port = port
        self.task = task
        self.keys = keys
        self.served = served
    }

    /// Starts the key server with one published key, `k1`.
    static func start() async throws -> FakeGoogle {
        let keys = NIOLockedValueBox<[(kid: String, key: JWTKit.Insecure.RSA.PrivateKey)]>([])
        let served = NIOLockedValueBox<(kids: [String], fetches: Int)>(([], 0))
        let router = Router()
        router.get("certs") { _, _ -> Response in
            let kids = served.withLockedValue { state -> [String] in
                state.fetches += 1
                return state.kids
            }
            let published = keys.withLockedValue { all in all.filter { kids.contains($0.kid) } }
            let body = try Self.jwks(published)
            return Response(status: .ok, headers: [.contentType: "application/json", .cacheControl: "public, max-age=3600"],
                            body: .init(byteBuffer: ByteBuffer(string: body)))
        }
        var quiet = Logger(label: "fake-google")
        quiet.logLevel = .critical
        // Port 0, read back once it listens: a port chosen beforehand can be taken in between.
        let (ports, listening) = AsyncStream.makeStream(of: Int.self)
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                              onServerRunning: { channel in
                                  listening.yield(channel.localAddress?.port ?? 0)
                                  listening.finish()
                              }, logger: quiet)
        let task = Task {
            defer { listening.finish() }
            try await app.runService(gracefulShutdownSignals: [])
        }
        var bound = ports.makeAsyncIterator()
        guard let port = await bound.next(), port > 0 else { throw TestFailure("fake Google key server did not start") }
        let google = FakeGoogle(port: port, task: task, keys: keys, served: served)
        try google.addKey("k1", published: true)
        // The probe blocks on a socket: off the cooperative pool, which the server needs.
        let up = try await eventually(within: 30, interval: .milliseconds(50)) {
            try await offThePool { (try? rawRequest(port: port, "GET", "/certs", timeout: 2))?.status == 200 }
        }
        guard up else { throw TestFailure("fake Google key server did not start") }
        served.withLockedValue { $0.fetches = 0 }
        return google
    }

    func stop() { task.cancel() }

    /// A new signing key; published (in the JWKS) or not (a key Google never announced).
    func addKey(_ kid: String, published: Bool) throws {
        let key = try JWTKit.Insecure.RSA.PrivateKey(backing: _RSA.Signing.PrivateKey(keySize: .bits2048))
        keys.withLockedValue { $0.append((kid, key)) }
        if published { served.withLockedValue { $0.kids.append(kid) } }
    }

    static func jwks(_ keys: [(kid: String, key: JWTKit.Insecure.RSA.PrivateKey)]) throws -> String {
        let entries = try keys.map { kid, key -> [String: String] in
            let (modulus, exponent) = try key.publicKey.getKeyPrimitives()
            return ["kty": "RSA", "alg": "RS256", "use": "sig", "kid": kid,
                    "n": SecureRandom.base64URL(Array(modulus)), "e": SecureRandom.base64URL(Array(exponent))]
        }
        return String(decoding: try JSONSerialization.data(withJSONObject: ["keys": entries]), as: UTF8.self)
    }

    struct Claims: Sendable {
        var subject = String(UInt64.random(in: 100_000_000_000_000_000...999_999_999_999_999_999))
        var email = "reader\(UInt32.random(in: 1_000_000...9_999_999))@gmail.com"
        var emailVerified = true
        var audience = FakeGoogle.clientID
        var issuer = "https://accounts.google.com"
        var name: String? = "Ada Reader"
        var issuedAt: Date
        var expires: Date

        init(now: Date) {
            issuedAt = now
            expires = now.addingTimeInterval(3600)
        }
    }

    /// An ID token as Google signs it (RS256), with key `kid`.
    func token(_ claims: Claims, kid: String = "k1") async throws -> String {
        guard let key = keys.withLockedValue({ $0.first { $0.kid == kid }?.key }) else { throw TestFailure("no key \(kid)") }
        let signer = JWTKeyCollection()
        await signer.add(rsa: key, digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid))
        return try await signer.sign(Self.payload(claims), kid: JWKIdentifier(string: kid))
    }

    /// A token whose header says HS256, keyed with the RSA public key's PEM (the classic
    /// algorithm-confusion forgery), and one with `alg: none`.
    func forgedTokens(_ claims: Claims) async throws -> [String] {
        guard let key = keys.withLockedValue({ $0.first?.key }) else { throw TestFailure("no key") }
        let hmac = JWTKeyCollection()
        await hmac.add(hmac: HMACKey(from: key.publicKey.pemRepresentation), digestAlgorithm: .sha256, kid: "k1")
        let hs256 = try await hmac.sign(Self.payload(claims), kid: "k1")
        let header = SecureRandom.base64URL(Array(#"{"alg":"none","kid":"k1","typ":"JWT"}"#.utf8))
        let body = hs256.split(separator: ".")[1]
        return [hs256, "\(header).\(body).", "\(header).\(body)"]
    }

    static func payload(_ claims: Claims) -> GoogleIdentityToken {
        GoogleIdentityToken(issuer: .init(value: claims.issuer), subject: .init(value: claims.subject),
                            audience: .init(value: [claims.audience]), authorizedPresenter: claims.audience,
                            issuedAt: .init(value: claims.issuedAt), expires: .init(value: claims.expires),
                            email: claims.email, emailVerified: .init(value: claims.emailVerified), name: claims.name)
    }
}

/// Runs `body` with a fake Google, stopping its key server afterwards.
func withFakeGoogle<T: Sendable>(_ body: @Sendable (FakeGoogle) async throws -> T) async throws -> T {
    let google = try await FakeGoogle.start()
    do {
        let result = try await body(google)
        google.stop()
        return result
    } catch {
        google.stop()
        throw error
    }
}
