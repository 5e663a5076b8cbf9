import BookwormCore
import Foundation
import HTTPTypes
import Hummingbird

/// `POST /v1/reports` (API.md, Reports and moderation).
package struct ReportsRoutes: Sendable {
    let service: ReportsService

    package init(service: ReportsService) {
        self.service = service
    }

    package func addRoutes(authenticated: RouterGroup<AppRequestContext>) {
        authenticated.post("reports", use: file)
    }

    @Sendable func file(_ request: Request, context: AppRequestContext) async throws -> Response {
        let reporter = try context.requireSession().user.id
        var request = request
        let body = try await request.decodeStrict(ReportBody.self, context: context)
        let (target, reason, details) = try Self.validate(body)
        let filed = try await service.file(by: reporter, from: context.clientAddress(request), target: target, reason: reason,
                                           details: details)
        return try .json(["id": filed.id.apiString, "status": "open"], status: .created, for: request)
    }

    /// Enums and lengths are the schema's (400); which of `id` and `username` goes with which
    /// target is a rule (422).
    static func validate(_ body: ReportBody) throws -> (ReportTarget, ReportReason, String?) {
        var errors: [FieldError] = []
        let reason = ReportReason(rawValue: body.reason)
        if reason == nil { errors.append(FieldError("reason", "is one of spam, abuse, fraud, other")) }
        let details = body.details?.trimmingCharacters(in: .whitespacesAndNewlines)
        if let details, details.count > 1000 { errors.append(FieldError("details", "is at most 1000 characters")) }
        if !["user", "copy", "post"].contains(body.target) { errors.append(FieldError("target", "is one of user, copy, post")) }
        if let username = body.username, username.count > 30 { errors.append(FieldError("username", "is at most 30 characters")) }
        guard errors.isEmpty, let reason else { throw AppError.validation(errors) }
        return (try target(body), reason, details?.isEmpty == true ? nil : details)
    }

    static func target(_ body: ReportBody) throws -> ReportTarget {
        if body.target == "user" {
            let username = body.username?.trimmingCharacters(in: .whitespaces) ?? ""
            guard !username.isEmpty, body.id == nil else {
                throw AppError.rule([FieldError("username", "names the user reported (and no id is given)")])
            }
            return .user(username)
        }
        guard let id = body.id, body.username == nil else {
            throw AppError.rule([FieldError("id", "is the \(body.target)'s id (and no username is given)")])
        }
        return body.target == "copy" ? .copy(id) : .post(id)
    }
}
