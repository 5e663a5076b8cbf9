import BookwormCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// `GET|POST /reset-password` and `GET|POST /verify-email`: the pages the mail links open. They
/// work without JavaScript; a form is needed to act (a mail scanner fetching the link changes
/// nothing). The form carries a CSRF value that must match a `SameSite=Strict` cookie set with
/// the page, so another site cannot post it. The token is in the URL: no referrer ever leaves.
package struct AccountPages: Sendable {
    let mail: AccountMail
    let templates: PageTemplates
    let secureCookie: Bool

    package init(mail: AccountMail, publicBaseURL: String) throws {
        self.mail = mail
        self.templates = try PageTemplates()
        self.secureCookie = publicBaseURL.lowercased().hasPrefix("https:")
    }

    package func addRoutes(to router: Router<AppRequestContext>) {
        router.get("reset-password") { request, _ in try await show(.reset, request) }
        router.post("reset-password") { request, context in try await submit(.reset, request, context: context) }
        router.get("verify-email") { request, _ in try await show(.verify, request) }
        router.post("verify-email") { request, context in try await submit(.verify, request, context: context) }
    }

    enum Kind {
        case reset, verify

        var prefix: String { self == .reset ? "rst_" : "vfy_" }
        var title: String { self == .reset ? "Choose a new password" : "Confirm your email address" }
    }

    static let csrfCookie = "bw_csrf"

    /// 400 for a token that cannot be ours, 410 for one that was ours (used or expired).
    func show(_ kind: Kind, _ request: Request) async throws -> Response {
        guard let token = request.uri.queryParameters.get("token"), Self.wellFormed(token, kind) else {
            return page("notice", status: .badRequest, .init(title: "Broken link", heading: "This link is broken",
                                                           error: "The link is incomplete. Copy the whole link from the email, or ask for a new one."))
        }
        guard try await mail.isLive(token) else { return gone(kind) }
        let csrf = SecureRandom.base64URL(SecureRandom.bytes(24))
        let form = PageTemplates.Page(title: kind.title, heading: kind.title,
                                      message: kind == .verify ? "One click and your address is confirmed." : nil,
                                      token: token, csrf: csrf)
        var response = page(kind == .reset ? "reset" : "verify", status: .ok, form)
        response.headers[.setCookie] = "\(Self.csrfCookie)=\(csrf); Path=/; Max-Age=3600; HttpOnly; SameSite=Strict"
            + (secureCookie ? "; Secure" : "")
        return response
    }

    func submit(_ kind: Kind, _ request: Request, context: AppRequestContext) async throws -> Response {
        let fields = try await FormBody.fields(request, context: context)
        guard let token = fields["token"], Self.wellFormed(token, kind) else {
            return page("notice", status: .badRequest, .init(title: "Broken link", heading: "This link is broken",
                                                           error: "The form was incomplete. Open the link from the email again."))
        }
        guard let sent = fields["csrf"], let cookie = request.cookies[Self.csrfCookie]?.value, !sent.isEmpty,
              Digest.constantTimeEqual(Array(sent.utf8), Array(cookie.utf8)) else {
            return page("notice", status: .forbidden, .init(title: "Try again", heading: "Please try again",
                                                          error: "This form expired or did not come from this page. Open the link from the email again."))
        }
        switch kind {
        case .verify:
            do { try await mail.verifyByLink(token) } catch let error as AppError where error.status == .unprocessableContent { return gone(kind) }
            return page("notice", status: .ok, .init(title: "Email confirmed", heading: "Your email address is confirmed",
                                                   message: "You can close this page and go back to the app."))
        case .reset:
            return try await reset(token: token, fields: fields)
        }
    }

    func reset(token: String, fields: [String: String]) async throws -> Response {
        let password = fields["password"] ?? ""
        var problem: String?
        if password != (fields["confirm"] ?? "") { problem = "The two passwords are not the same." }
        if problem == nil, (try? AccountValidation.password(password)) == nil { problem = "The password must be 10 to 128 characters." }
        if let problem {
            let form = PageTemplates.Page(title: Kind.reset.title, heading: Kind.reset.title, error: problem, token: token,
                                          csrf: fields["csrf"])
            return page("reset", status: .unprocessableContent, form)
        }
        do {
            try await mail.confirmReset(token: token, newPassword: password)
        } catch let error as AppError where error.status == .unprocessableContent {
            return gone(.reset)
        }
        return page("notice", status: .ok, .init(title: "Password changed", heading: "Your password is changed",
                                               message: "Sign in with it in the app. Every device that was signed in has been signed out."))
    }

    func gone(_ kind: Kind) -> Response {
        let what = kind == .reset ? "a new password reset from the app" : "a new confirmation email from the app"
        return page("notice", status: .gone, .init(title: "Link expired", heading: "This link has expired",
                                                 error: "It was already used, or it is too old. Ask for \(what)."))
    }

    static func wellFormed(_ token: String, _ kind: Kind) -> Bool {
        token.count == 47 && token.hasPrefix(kind.prefix)
            && token.dropFirst(4).allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
    }

    func page(_ template: String, status: HTTPResponse.Status, _ content: PageTemplates.Page) -> Response {
        var headers: HTTPFields = [
            .contentType: "text/html; charset=utf-8",
            .contentSecurityPolicy: PageTemplates.contentSecurityPolicy,
            .cacheControl: "no-store",
        ]
        headers[.xContentTypeOptions] = "nosniff"
        for (name, value) in [("Referrer-Policy", "no-referrer"), ("X-Frame-Options", "DENY")] {
            if let name = HTTPField.Name(name) { headers[name] = value }
        }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: templates.render(template, content))))
    }
}
