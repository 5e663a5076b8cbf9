import BookwormCore
import Foundation
import JWTKit
import NIOSSL

/// A push a room queues for a user, in the transaction of what it tells. It goes to each of the
/// user's devices whose provider is configured, unless the user turned its `category` off.
package struct PushMessage: Sendable {
    package let userID: UUID
    /// `trades`, `alerts` or `contact` (what `PATCH /v1/me {push}` turns off); `test` always goes.
    package let category: String
    /// Short English text that says no more than the matching mail.
    package let title: String
    package let body: String
    /// `data.kind` and `data.id`: which screen the app opens.
    package let kind: String
    package let objectID: UUID
    /// Pushes about one thing share it, so a phone shows only the latest.
    package let collapseID: String?

    package init(userID: UUID, category: String, title: String, body: String, kind: String, objectID: UUID, collapseID: String? = nil) {
        self.userID = userID
        self.category = category
        self.title = title
        self.body = body
        self.kind = kind
        self.objectID = objectID
        self.collapseID = collapseID
    }
}

/// Apple's push service, configured by `APNS_*` (README, Push notifications).
package struct APNsSettings: Sendable {
    package var key: ES256PrivateKey
    package var keyID: String
    package var teamID: String
    package var topic: String
    package var url = "https://api.push.apple.com"
    package var sandboxURL = "https://api.sandbox.push.apple.com"
    /// How long one provider token is used before another is signed (Apple allows an hour).
    package var tokenLifetime: TimeInterval = 50 * 60
}

/// Firebase Cloud Messaging (HTTP v1), configured by `FCM_*`.
package struct FCMSettings: Sendable {
    package var account: FCMServiceAccount
    package var url = "https://fcm.googleapis.com"
}

/// The fields of Google's service-account JSON that FCM needs.
package struct FCMServiceAccount: Decodable, Sendable {
    package let projectID: String
    package let clientEmail: String
    package let privateKey: String
    package let tokenURI: String

    enum CodingKeys: String, CodingKey {
        case projectID = "project_id", clientEmail = "client_email", privateKey = "private_key", tokenURI = "token_uri"
    }
}

/// Push delivery: the providers (none configured: pushes are not queued at all) and how the
/// worker sends.
package struct PushSettings: Sendable {
    package var apns: APNsSettings?
    package var fcm: FCMSettings?
    /// An extra CA the push client trusts (a private gateway; the tests' fake providers).
    package var caFile: String?
    /// A provider that has not answered by then is tried again later.
    package var timeoutSeconds = 10
    /// Pushes claimed at once: their claim and outcomes are one statement each.
    package var batchSize = 500
    /// Requests in flight at once, over one HTTP/2 connection per provider (APNs and NIO servers
    /// allow 100 concurrent streams on a connection by default).
    package var inFlight = 100
    /// After this many tries a push is dropped: news that late is no longer news.
    package var maxAttempts = 8

    /// How long a claimed batch stays a worker's: two batches are out at once, and a push may
    /// take four requests (a token grant, the push, a renewal, the push again), each up to the timeout.
    package var lease: TimeInterval {
        max(300, Double(2 * batchSize / max(1, inFlight) * 4 * timeoutSeconds) + 60)
    }

    package init() {}

    /// The platforms whose devices get pushes.
    package var platforms: [String] { (apns == nil ? [] : ["apns"]) + (fcm == nil ? [] : ["fcm"]) }

    package static func fromEnvironment(_ reader: EnvironmentReader) throws -> PushSettings {
        var settings = PushSettings()
        settings.caFile = try reader.string("APNS_CA_FILE").map { path in
            do {
                _ = try NIOSSLCertificate.fromPEMFile(path)
            } catch {
                throw ConfigError(variable: "APNS_CA_FILE", message: "expected a PEM certificate file, could not read \(path): \(error)")
            }
            return path
        }
        settings.timeoutSeconds = try reader.int("BOOKWORM_PUSH_TIMEOUT_SECONDS", range: 1...300) ?? settings.timeoutSeconds
        settings.apns = try apns(reader)
        if let path = reader.string("FCM_SERVICE_ACCOUNT_FILE") {
            let account: FCMServiceAccount
            do {
                account = try JSONDecoder().decode(FCMServiceAccount.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
                _ = try Insecure.RSA.PrivateKey(pem: account.privateKey)
            } catch {
                throw ConfigError(variable: "FCM_SERVICE_ACCOUNT_FILE",
                                  message: "expected a service-account JSON with project_id, client_email, private_key and token_uri (\(error))")
            }
            guard URL(string: account.tokenURI)?.host != nil else {
                throw ConfigError(variable: "FCM_SERVICE_ACCOUNT_FILE", message: "token_uri is not a URL")
            }
            var fcm = FCMSettings(account: account)
            fcm.url = try reader.url("FCM_URL", schemes: ["https"]) ?? fcm.url
            settings.fcm = fcm
        }
        return settings
    }

    private static func apns(_ reader: EnvironmentReader) throws -> APNsSettings? {
        guard let path = reader.string("APNS_KEY_FILE") else { return nil }
        let key: ES256PrivateKey
        do {
            key = try ES256PrivateKey(pem: String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self))
        } catch {
            throw ConfigError(variable: "APNS_KEY_FILE", message: "expected Apple's .p8 key (a PEM EC private key): \(error)")
        }
        func required(_ name: String) throws -> String {
            guard let value = reader.string(name) else {
                throw ConfigError(variable: name, message: "required with APNS_KEY_FILE")
            }
            return value
        }
        var apns = APNsSettings(key: key, keyID: try required("APNS_KEY_ID"), teamID: try required("APNS_TEAM_ID"),
                                topic: try required("APNS_TOPIC"))
        apns.url = try reader.url("APNS_URL", schemes: ["https"]) ?? apns.url
        apns.sandboxURL = try reader.url("APNS_SANDBOX_URL", schemes: ["https"]) ?? apns.sandboxURL
        return apns
    }
}
