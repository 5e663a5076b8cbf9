import BookwormCore
import Foundation
import JWTKit
import Logging

/// Checks a Google ID token: RS256 only, signed by a key Google publishes, issued by Google,
/// unexpired on the injected clock (with `leeway`), meant for one of our client ids, and with
/// a verified email. Every failure is the same 401, so a caller learns nothing from which.
package struct GoogleVerifier: Sendable {
    let settings: GoogleSettings
    let keySet: GoogleKeySet
    let clock: any AppClock
    let logger: Logger

    package init(settings: GoogleSettings, clock: any AppClock, logger: Logger) {
        self.settings = settings
        self.keySet = GoogleKeySet(url: settings.jwksURL, refetchInterval: settings.refetchInterval,
                                   fetchTimeout: settings.fetchTimeout, clock: clock, logger: logger)
        self.clock = clock
        self.logger = logger
    }

    static let invalid = AppError.unauthorized(code: "invalid_credentials", detail: "The Google token is not valid")
    static let issuers: Set<String> = ["accounts.google.com", "https://accounts.google.com"]

    package func verify(_ idToken: String) async throws -> GoogleIdentity {
        guard idToken.utf8.count <= 8192, let kid = Self.rs256KeyID(idToken) else { throw Self.invalid }
        guard let keys = try await keySet.keys(for: kid) else {
            logger.info("Google token names an unknown key", metadata: ["kid": .string(String(kid.prefix(64)))])
            throw Self.invalid
        }
        let claims: GoogleIdentityToken
        do {
            claims = try await keys.verify(idToken, as: GoogleClaims.self).token
        } catch {
            throw Self.invalid
        }
        let now = clock.now()
        guard Self.issuers.contains(claims.issuer.value),
              now < claims.expires.value.addingTimeInterval(settings.leeway),
              claims.issuedAt.value <= now.addingTimeInterval(settings.leeway),
              settings.clientIDs.contains(where: { (try? claims.audience.verifyIntendedAudience(includes: $0)) != nil }),
              (1...255).contains(claims.subject.value.count),
              claims.emailVerified?.value == true,
              let email = claims.email, email.count <= 254, email.contains("@")
        else { throw Self.invalid }
        return GoogleIdentity(subject: claims.subject.value, email: email, name: claims.name)
    }

    /// The header's key id, when the header says RS256 (what Google signs with). Anything else,
    /// `none` and HS256 among them, is refused before any key is looked at.
    static func rs256KeyID(_ token: String) -> String? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = Data(base64URL: String(parts[0])),
              let fields = try? JSONSerialization.jsonObject(with: header) as? [String: Any],
              fields["alg"] as? String == "RS256", let kid = fields["kid"] as? String, !kid.isEmpty
        else { return nil }
        return kid
    }
}
