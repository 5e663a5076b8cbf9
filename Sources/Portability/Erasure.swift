import BookwormCore
import Foundation

/// `DELETE /v1/me`: the password again, nothing else.
/// The password, or for an account without one, a Google ID token of its linked Google account.
struct EraseAccountBody: StrictBody {
    let password: String?
    let idToken: String?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case password
        case idToken = "id_token"
    }
}

/// What proves the person at the keyboard is the account's owner, again.
enum ErasureProof: Sendable {
    case password(String)
    case google(idToken: String)
}

/// How long an erased username stays unavailable (`BOOKWORM_USERNAME_HOLD_DAYS`).
package struct ErasurePolicy: Sendable {
    package var usernameHoldDays = 30

    package init() {}
}
