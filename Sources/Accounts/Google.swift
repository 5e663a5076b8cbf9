import BookwormCore
import Foundation
import JWTKit

/// Google sign-in, on when `GOOGLE_CLIENT_IDS` names at least one OAuth client id.
package struct GoogleSettings: Sendable {
    /// The app's OAuth client ids (web, iOS, Android): a token must be meant for one of them.
    package var clientIDs: [String] = []
    /// Where Google publishes its signing keys (a JWKS).
    package var jwksURL = "https://www.googleapis.com/oauth2/v3/certs"
    /// At most one fetch per this many seconds when a token names a key we do not know.
    package var refetchInterval: TimeInterval = 60
    /// A fetch of the keys that has not finished by then fails (503).
    package var fetchTimeout: TimeInterval = 5
    /// Clock skew tolerated on `exp` and `iat`.
    package var leeway: TimeInterval = 60

    package var enabled: Bool { !clientIDs.isEmpty }

    package init() {}
}

/// What a verified Google ID token vouches for.
package struct GoogleIdentity: Sendable {
    package let subject: String
    package let email: String
    package let name: String?
}

/// `GoogleIdentityToken`'s claims, decoded by jwt-kit once the signature holds, but checked by
/// `GoogleVerifier` rather than by jwt-kit: its own check reads the wall clock, and expiry here
/// is measured on the injected clock.
struct GoogleClaims: JWTPayload {
    let token: GoogleIdentityToken

    init(from decoder: any Decoder) throws {
        token = try GoogleIdentityToken(from: decoder)
    }

    func encode(to encoder: any Encoder) throws {
        try token.encode(to: encoder)
    }

    func verify(using _: some JWTAlgorithm) throws {}
}

/// `POST /v1/auth/google` and `POST /v1/me/identities/google`.
package struct GoogleTokenBody: StrictBody {
    let idToken: String

    package enum CodingKeys: String, CodingKey, CaseIterable {
        case idToken = "id_token"
    }
}
