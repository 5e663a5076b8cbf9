import BookwormCore
import Foundation
import HTTPTypes
import Hummingbird

/// `/v1/auth/verify-email*` and `/v1/auth/password-reset*` (API.md, Accounts).
package struct AccountMailRoutes: Sendable {
    package let mail: AccountMail

    package init(mail: AccountMail) {
        self.mail = mail
    }

    package func addRoutes(public group: RouterGroup<AppRequestContext>, authenticated: RouterGroup<AppRequestContext>) {
        authenticated.post("auth/verify-email", use: verify)
        authenticated.post("auth/verify-email/resend", use: resend)
        group.post("auth/password-reset", use: requestReset)
        group.post("auth/password-reset/confirm", use: confirmReset)
    }

    @Sendable func verify(_ request: Request, context: AppRequestContext) async throws -> Response {
        let user = try context.requireSession().user
        var request = request
        let body = try await request.decodeStrict(VerifyEmailBody.self, context: context)
        let code = body.code.trimmingCharacters(in: .whitespaces)
        guard code.count == 6, code.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw AppError.invalid("code", "must be the 6 digits from the email")
        }
        try await mail.verify(user, code: code)
        return .noContent()
    }

    @Sendable func resend(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await mail.resendCode(to: context.requireSession().user)
        return Response(status: .accepted)
    }

    @Sendable func requestReset(_ request: Request, context: AppRequestContext) async throws -> Response {
        var request = request
        let body = try await request.decodeStrict(PasswordResetBody.self, context: context)
        let email = try AccountValidation.email(body.email)
        try await mail.requestReset(email: email.normalized, clientAddress: context.clientAddress(request))
        return Response(status: .accepted)
    }

    @Sendable func confirmReset(_ request: Request, context: AppRequestContext) async throws -> Response {
        var request = request
        let body = try await request.decodeStrict(PasswordResetConfirmBody.self, context: context)
        let password = try AccountValidation.password(body.newPassword, field: "new_password")
        try await mail.confirmReset(token: body.token.trimmingCharacters(in: .whitespaces), newPassword: password)
        return .noContentAfterASecret()
    }
}

struct VerifyEmailBody: StrictBody {
    let code: String
    enum CodingKeys: String, CodingKey, CaseIterable { case code }
}

struct PasswordResetBody: StrictBody {
    let email: String
    enum CodingKeys: String, CodingKey, CaseIterable { case email }
}

struct PasswordResetConfirmBody: StrictBody {
    let token: String
    let newPassword: String
    enum CodingKeys: String, CodingKey, CaseIterable {
        case token
        case newPassword = "new_password"
    }
}
