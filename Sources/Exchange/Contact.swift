import BookwormCore
import Catalog
import Foundation

package struct ContactBody: StrictBody {
    let toUsername: String?
    let copyID: UUID?
    let postID: UUID?
    let message: String
    let shareEmail: Bool

    package enum CodingKeys: String, CodingKey, CaseIterable {
        case message
        case toUsername = "to_username", copyID = "copy_id", postID = "post_id", shareEmail = "share_email"
    }
}

/// Whom a contact request is for, and what about.
package enum ContactTarget: Sendable {
    case user(String)
    case copy(UUID)
    case post(UUID)

    /// What was contacted about: the `kind` of the `contact` event.
    var kind: String {
        switch self {
        case .user: "user"
        case .copy: "copy"
        case .post: "post"
        }
    }
}

/// The recipient as the service knows them: their address never leaves the server.
package struct ContactRecipient: Sendable {
    let id: UUID
    let username: String
    let email: String
    let emailVerified: Bool
    let copyID: UUID?
    let postID: UUID?
    let bookTitle: String?
}

/// How many contact mails one sender may send.
package struct ContactPolicy: Sendable {
    package var perHour: Int
    package var perRecipientPerDay: Int

    package init(perHour: Int = 10, perRecipientPerDay: Int = 3) {
        self.perHour = perHour
        self.perRecipientPerDay = perRecipientPerDay
    }
}

/// A request I sent, as `GET /v1/me/contacts` shows it: never the recipient's address.
package struct ContactView: Encodable, Sendable {
    let id: UUID
    let to: OwnerSummary
    let copyID: UUID?
    let postID: UUID?
    let bookTitle: String?
    let message: String
    let shareEmail: Bool
    let status: String
    let createdAt: Date
    let createdMicros: Int64

    var cursor: Cursor { Cursor(micros: createdMicros, id: id) }

    enum CodingKeys: String, CodingKey {
        case id, to, message, status
        case copyID = "copy_id", postID = "post_id", bookTitle = "book_title", shareEmail = "share_email", createdAt = "created_at"
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.apiString, forKey: .id)
        try container.encode(to, forKey: .to)
        try container.encode(copyID?.apiString, forKey: .copyID)
        try container.encode(postID?.apiString, forKey: .postID)
        try container.encode(bookTitle, forKey: .bookTitle)
        try container.encode(message, forKey: .message)
        try container.encode(shareEmail, forKey: .shareEmail)
        try container.encode(status, forKey: .status)
        try container.encode(createdAt, forKey: .createdAt)
    }
}
