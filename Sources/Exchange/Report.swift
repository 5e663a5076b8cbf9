import BookwormCore
import Foundation

/// `POST /v1/reports`: `target` names the kind, then `id` (copy, post) or `username` (user).
package struct ReportBody: StrictBody {
    let target: String
    let id: UUID?
    let username: String?
    let reason: String
    let details: String?

    package enum CodingKeys: String, CodingKey, CaseIterable {
        case target, id, username, reason, details
    }
}

package enum ReportTarget: Sendable, Equatable {
    case user(String)
    case copy(UUID)
    case post(UUID)

    var kind: String {
        switch self {
        case .user: "user"
        case .copy: "copy"
        case .post: "post"
        }
    }
}

package enum ReportReason: String, Sendable, CaseIterable {
    case spam, abuse, fraud, other
}

/// How an admin closes a report (and every other open report on the same target).
package enum ReportAction: String, Sendable, CaseIterable {
    /// Nothing wrong: the target is shown again.
    case dismiss
    /// The copy or post stays hidden for good (its owner still sees it).
    case remove
    /// The target's owner is suspended.
    case suspend

    var status: String {
        switch self {
        case .dismiss: "dismissed"
        case .remove: "removed"
        case .suspend: "suspended"
        }
    }
}

/// How many different people must report a copy or post before it is hidden, and who counts:
/// a verified address and an account at least `minAccountHours` old, one per client address.
package struct ReportPolicy: Sendable {
    package var hideThreshold = 3
    package var minAccountHours = 72

    package init() {}
}

/// A report as the admin sees it.
package struct ReportRecord: Sendable {
    let id: UUID
    let reporter: String
    let targetKind: String
    let targetID: UUID
    let targetUser: String
    let reason: String
    let details: String?
    let status: String
    let createdAt: Date
    let resolvedAt: Date?
    /// Different people with an open report on the same target.
    let openOnTarget: Int
    let targetHidden: Bool
}

/// Who ran an admin command, and where: recorded with every action.
package struct AdminActor: Sendable {
    package let name: String
    package let host: String

    package init(name: String, host: String) {
        self.name = name
        self.host = host
    }

    /// The login behind `sudo` if any, else the user running the command.
    package static func current() -> AdminActor {
        let environment = ProcessInfo.processInfo.environment
        let account = getpwuid(getuid()).flatMap { $0.pointee.pw_name.map { String(cString: $0) } }
        let name = environment["SUDO_USER"] ?? environment["USER"] ?? environment["LOGNAME"] ?? account ?? "uid \(getuid())"
        return AdminActor(name: name, host: ProcessInfo.processInfo.hostName)
    }
}
