import BookwormCore
import Foundation

/// `DELETE /v1/me`: the password again, nothing else.
struct EraseAccountBody: StrictBody {
    let password: String

    enum CodingKeys: String, CodingKey, CaseIterable { case password }
}

/// How long an erased username stays unavailable (`BOOKWORM_USERNAME_HOLD_DAYS`).
package struct ErasurePolicy: Sendable {
    package var usernameHoldDays = 30

    package init() {}
}
