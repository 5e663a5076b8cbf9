import HTTPTypes
import Hummingbird
import BookwormCore
import Foundation

struct PrivateUser: Encodable, Sendable {
    let id: UUID
    let email: String
    let emailVerified: Bool
    let username: String
    let displayName: String?
    let bio: String?
    let createdAt: Date
    let alerts: String
    let push: [String: Bool]

    init(_ user: UserRecord) {
        id = user.id
        email = user.email
        emailVerified = user.emailVerifiedAt != nil
        username = user.username
        displayName = user.displayName
        bio = user.bio
        createdAt = user.createdAt
        alerts = user.alerts
        push = Dictionary(uniqueKeysWithValues: PushPreference.kinds.map { ($0, !user.pushOff.contains($0)) })
    }

    enum CodingKeys: String, CodingKey {
        case id, email, username, bio, alerts, push
        case emailVerified = "email_verified", displayName = "display_name", createdAt = "created_at"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.apiString, forKey: .id)
        try container.encode(email, forKey: .email)
        try container.encode(emailVerified, forKey: .emailVerified)
        try container.encode(username, forKey: .username)
        try container.encode(displayName, forKey: .displayName)
        try container.encode(bio, forKey: .bio)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(alerts, forKey: .alerts)
        try container.encode(push, forKey: .push)
    }
}

/// A public profile's figures from other rooms: copies on offer, completed trades, ratings.
package struct ProfileFacts: Sendable {
    package var availableCopies: Int
    package var completedTrades: Int
    /// Nil while nobody has rated the user.
    package var ratingAverage: Double?
    package var ratingCount: Int

    package init(availableCopies: Int, completedTrades: Int, ratingAverage: Double?, ratingCount: Int) {
        self.availableCopies = availableCopies
        self.completedTrades = completedTrades
        self.ratingAverage = ratingAverage
        self.ratingCount = ratingCount
    }
}

struct PublicUser: Encodable, Sendable {
    let id: UUID
    let username: String
    let displayName: String?
    let bio: String?
    let createdAt: Date
    let facts: ProfileFacts

    enum CodingKeys: String, CodingKey {
        case id, username, bio, rating
        case displayName = "display_name", createdAt = "created_at", availableCopies = "available_copies"
        case completedTrades = "completed_trades"
    }

    enum RatingKeys: String, CodingKey { case average, count }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.apiString, forKey: .id)
        try container.encode(username, forKey: .username)
        try container.encode(displayName, forKey: .displayName)
        try container.encode(bio, forKey: .bio)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(facts.availableCopies, forKey: .availableCopies)
        try container.encode(facts.completedTrades, forKey: .completedTrades)
        var rating = container.nestedContainer(keyedBy: RatingKeys.self, forKey: .rating)
        try rating.encode(facts.ratingAverage, forKey: .average)
        try rating.encode(facts.ratingCount, forKey: .count)
    }
}

extension AuthResponse {
    /// `no-store`: an answer carrying a session token is never cached, nor kept under an
    /// `Idempotency-Key` for replay.
    func response(status: HTTPResponse.Status = .ok, for request: Request) throws -> Response {
        var response = try Response.json(self, status: status, for: request)
        response.headers[.cacheControl] = "no-store"
        return response
    }
}

extension Response {
    /// 204 to a request whose body held a password: `no-store`, so that under an
    /// `Idempotency-Key` neither the answer nor a hash of the body is kept (a retry is 409).
    static func noContentAfterASecret() -> Response {
        Response(status: .noContent, headers: [.cacheControl: "no-store"])
    }
}

struct AuthResponse: Encodable, Sendable {
    let user: PrivateUser
    let token: String
    let expiresAt: Date
    /// Google sign-in only: whether this sign-in made the account.
    var created: Bool?

    enum CodingKeys: String, CodingKey {
        case user, token, created
        case expiresAt = "expires_at"
    }
}


package struct SessionPolicy: Sendable {
    /// A token unused for this long stops working.
    package var idleTimeout: TimeInterval
    /// A token stops working this long after login, however often it is used.
    package var absoluteTimeout: TimeInterval

    package init(idleTimeout: TimeInterval = 30 * 86400, absoluteTimeout: TimeInterval = 90 * 86400) {
        self.idleTimeout = idleTimeout
        self.absoluteTimeout = absoluteTimeout
    }
}

package struct ThrottlePolicy: Sendable {
    package var loginFailures: Int
    package var loginWindow: TimeInterval
    package var registrations: Int
    package var registrationWindow: TimeInterval

    package init(loginFailures: Int = 10, loginWindow: TimeInterval = 15 * 60,
                registrations: Int = 20, registrationWindow: TimeInterval = 3600) {
        self.loginFailures = loginFailures
        self.loginWindow = loginWindow
        self.registrations = registrations
        self.registrationWindow = registrationWindow
    }
}

// MARK: - Request bodies

struct RegisterBody: StrictBody {
    let email: String
    let username: String
    let password: String
    let displayName: String?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case email, username, password
        case displayName = "display_name"
    }
}

struct LoginBody: StrictBody {
    let login: String
    let password: String

    enum CodingKeys: String, CodingKey, CaseIterable {
        case login, password
    }
}

struct ChangePasswordBody: StrictBody {
    let currentPassword: String
    let newPassword: String

    enum CodingKeys: String, CodingKey, CaseIterable {
        case currentPassword = "current_password", newPassword = "new_password"
    }
}

/// The kinds of push a user can turn off, as `PATCH /v1/me {push: {…}}` names them.
package enum PushPreference {
    package static let kinds = ["trades", "alerts", "contact"]
}

/// `PATCH /v1/me`: null clears the display name or the bio; `alerts` cannot be cleared.
struct UpdateMeBody: PatchBody {
    var displayName: FieldUpdate<String> = .unchanged
    var bio: FieldUpdate<String> = .unchanged
    /// `instant`, `daily` or `off`; checked by the route, which names the field.
    var alerts: String?
    /// Kinds of push turned on (true) or off (false); the route checks the kinds.
    var push: [String: Bool]?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case bio, alerts, push
        case displayName = "display_name"
    }

    static let nullableKeys: [CodingKeys] = [.displayName, .bio]

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        displayName = try FieldUpdate(container, .displayName)
        bio = try FieldUpdate(container, .bio)
        alerts = try container.decodeIfPresent(String.self, forKey: .alerts)
        push = try container.decodeIfPresent([String: Bool].self, forKey: .push)
    }
}
