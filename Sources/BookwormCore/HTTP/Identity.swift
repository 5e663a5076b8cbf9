import Foundation

/// A user row as the stores return it. Never encoded directly: the API shows `PrivateUser`
/// to the owner and `PublicUser` to everyone else.
package struct UserRecord: Sendable {
    package let id: UUID
    package let email: String
    package let username: String
    package let displayName: String?
    package let bio: String?
    /// Nil for an account made by Google sign-in that never set a password.
    package let passwordHash: String?
    package let emailVerifiedAt: Date?
    package let createdAt: Date
    /// How alerts are mailed: `instant`, `daily` or `off`.
    package let alerts: String
    /// Set while an admin has suspended the account.
    package let suspendedAt: Date?
    /// The kinds of push turned off: `trades`, `alerts`, `contact`.
    package let pushOff: Set<String>

    package init(id: UUID, email: String, username: String, displayName: String? = nil, bio: String? = nil, passwordHash: String?, emailVerifiedAt: Date? = nil, createdAt: Date, alerts: String = "daily", suspendedAt: Date? = nil,
                 pushOff: Set<String> = []) {
        self.id = id
        self.email = email
        self.username = username
        self.displayName = displayName
        self.bio = bio
        self.passwordHash = passwordHash
        self.emailVerifiedAt = emailVerifiedAt
        self.createdAt = createdAt
        self.alerts = alerts
        self.suspendedAt = suspendedAt
        self.pushOff = pushOff
    }
}

/// Who is calling, as established by `SessionMiddleware`.
package struct AuthenticatedSession: Sendable {
    package let sessionID: UUID
    package let user: UserRecord

    package init(sessionID: UUID, user: UserRecord) {
        self.sessionID = sessionID
        self.user = user
    }
}

extension UUID {
    /// Ids go out in lower case, the canonical RFC 9562 text form.
    package var apiString: String { uuidString.lowercased() }

    /// The canonical text form, in either case, read by hand: Foundation's parser goes through
    /// `sscanf`, and the live events' dispatcher reads an id from every notification.
    package init?(canonical text: Substring) {
        guard text.utf8.count == 36 else { return nil }
        var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let read = withUnsafeMutableBytes(of: &uuid) { out -> Bool in
            var at = 0
            for (offset, character) in text.utf8.enumerated() {
                if offset == 8 || offset == 13 || offset == 18 || offset == 23 {
                    guard character == UInt8(ascii: "-") else { return false }
                    continue
                }
                guard let nibble = InputSanity.hexValue(character) else { return false }
                out[at / 2] |= at.isMultiple(of: 2) ? nibble << 4 : nibble
                at += 1
            }
            return true
        }
        guard read else { return nil }
        self.init(uuid: uuid)
    }
}
