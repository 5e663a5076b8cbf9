import BookwormCore
import Foundation

/// `POST /v1/me/devices`.
struct RegisterDeviceBody: StrictBody {
    let platform: String
    let token: String
    let environment: String?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case platform, token, environment
    }
}

/// A phone as its owner sees it: which provider, which environment, when, and whether it is
/// the one this session registered. The token stays out of the answer; the export has it.
struct DeviceView: Encodable, Sendable {
    let id: UUID
    let platform: String
    let environment: String
    let createdAt: Date
    let createdMicros: Int64
    let current: Bool

    var cursor: Cursor { Cursor(micros: createdMicros, id: id) }

    enum CodingKeys: String, CodingKey {
        case id, platform, environment, current
        case createdAt = "created_at"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.apiString, forKey: .id)
        try container.encode(platform, forKey: .platform)
        try container.encode(environment, forKey: .environment)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(current, forKey: .current)
    }
}

enum DeviceValidation {
    /// At most this many devices per user: a new one pushes the oldest out.
    static let perUser = 20

    /// APNs tokens are hex; FCM registration tokens are URL-safe text. Either goes into a URL
    /// path or a JSON body, so nothing else is taken.
    static func check(_ body: RegisterDeviceBody) throws -> (platform: String, token: String, environment: String) {
        guard ["apns", "fcm"].contains(body.platform) else { throw AppError.invalid("platform", "must be apns or fcm") }
        let environment = body.environment ?? "production"
        guard ["production", "sandbox"].contains(environment) else {
            throw AppError.invalid("environment", "must be production or sandbox")
        }
        let token = body.token
        // The schema's pattern: URL-safe text, as FCM registration tokens are.
        guard (32...4096).contains(token.utf8.count),
              token.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_:".contains($0)) }) else {
            throw AppError.invalid("token", "must be 32 to 4096 letters, digits, '-', '_' or ':'")
        }
        // An APNs token is hex, and short: a rule the schema cannot state per platform.
        if body.platform == "apns" {
            guard token.utf8.count <= 200, token.allSatisfy(\.isHexDigit) else {
                throw AppError.rule([FieldError("token", "an APNs device token is 32 to 200 hex digits")])
            }
            return (body.platform, token.lowercased(), environment)
        }
        return (body.platform, token, environment)
    }
}
