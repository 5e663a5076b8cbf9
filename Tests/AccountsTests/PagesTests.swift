import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport

/// The pages behind the mail links, opened in a real headless browser against a real
/// `bookworm serve` process whose `PUBLIC_BASE_URL` is the address the links carry.
@Suite struct PagesTests {
    func withPagesServer(_ body: @escaping @Sendable (TestApp, SMTPSink, ServerProcess) async throws -> Void) async throws {
        try await withSink { sink in
            // The links carry the port, so it is chosen before the server starts.
            try await ServerProcess.withFreePort { port in
                let base = "http://127.0.0.1:\(port)"
                try await withApp(configure: { $0.mail.publicBaseURL = base }) { app in
                    let server = try await ServerProcess(databaseURL: app.settings.connectionURL, port: port,
                                                         environment: ["PUBLIC_BASE_URL": base])
                    do {
                        try await body(app, sink, server)
                        server.stop()
                    } catch {
                        server.stop()
                        throw error
                    }
                }
            }
        }
    }

    func link(_ path: String, to account: TestApp.Account, in sink: SMTPSink) throws -> String {
        let pattern = try Regex("http://127\\.0\\.0\\.1:[0-9]+/\(path)\\?token=[A-Za-z0-9_-]+")
        guard let mail = sink.messages().last(where: { $0.envelopeTo == account.email && $0.body.contains("/\(path)?") }),
              let match = mail.body.firstMatch(of: pattern) else { throw TestFailure("no \(path) link for \(account.email)") }
        return String(mail.body[match.range])
    }

    @Test func aForgottenPasswordIsResetFromTheMailLinkInABrowser() async throws {
        try await withPagesServer { app, sink, _ in
            let alice = try await app.register()
            #expect(try await app.request(.post, "/v1/auth/password-reset", json: ["email": alice.email]).status == .accepted)
            try await app.deliver(to: sink)
            let url = try link("reset-password", to: alice, in: sink)

            let mismatch = try await Browser.run(["reset", url, "a brand new secret", "a different secret"])
            #expect(mismatch.before.heading == "Choose a new password" && mismatch.before.scripts == 0)
            #expect(mismatch.after?.error == "The two passwords are not the same.")
            let screenshot = FileManager.default.temporaryDirectory.appendingPathComponent("bookworm-reset-\(UUID().uuidString).png").path
            let done = try await Browser.run(["reset", url, "a brand new secret", "a brand new secret", screenshot])
            #expect(done.after?.heading == "Your password is changed", "\(String(describing: done.after))")
            #expect(FileManager.default.fileExists(atPath: screenshot))

            let login = try await app.request(.post, "/v1/auth/login", json: ["login": alice.username, "password": "a brand new secret"])
            #expect(login.status == .ok)
            #expect(try await app.request(.post, "/v1/auth/login", json: ["login": alice.username, "password": alice.password]).status
                    == .unauthorized)
            #expect(try await app.request(.get, "/v1/me", token: alice.token).status == .unauthorized, "old sessions are signed out")

            let again = try await Browser.run(["open", url])
            #expect(again.before.heading == "This link has expired")
        }
    }

    @Test func anExpiredOrBrokenLinkShowsWhatWentWrong() async throws {
        try await withPagesServer { app, sink, server in
            let bob = try await app.register()
            #expect(try await app.request(.post, "/v1/auth/password-reset", json: ["email": bob.email]).status == .accepted)
            try await app.deliver(to: sink)
            let url = try link("reset-password", to: bob, in: sink)
            try await app.db.query("UPDATE password_resets SET expires_at = now() - interval '1 minute'")
            let expired = try await Browser.run(["open", url])
            #expect(expired.before.heading == "This link has expired")
            #expect(expired.before.error?.contains("Ask for a new password reset") == true)
            let broken = try await Browser.run(["open", "http://127.0.0.1:\(server.port)/reset-password?token=rst_cut-short"])
            #expect(broken.before.heading == "This link is broken")

            // What the browser was sent: the status, and headers that keep the token in the page.
            let port = server.port
            let gone = try await offThePool { try rawRequest(port: port, "GET", String(url.dropFirst("http://127.0.0.1:\(port)".count))) }
            #expect(gone.status == 410)
            let bad = try await offThePool { try rawRequest(port: port, "GET", "/reset-password?token=nope") }
            #expect(bad.status == 400)
            #expect(bad.headers["referrer-policy"] == "no-referrer")
            let policy = try #require(bad.headers["content-security-policy"])
            #expect(policy.hasPrefix("default-src 'none'") && !policy.contains("script-src") && policy.contains("form-action 'self'"))
            #expect(bad.headers["content-type"] == "text/html; charset=utf-8")
        }
    }

    @Test func theVerificationLinkConfirmsTheAddressWithOneClick() async throws {
        try await withPagesServer { app, sink, server in
            let carol = try await app.register()
            try await app.deliver(to: sink)
            let url = try link("verify-email", to: carol, in: sink)
            // Opening the link changes nothing (a mail scanner may fetch it); the button does.
            _ = try await Browser.run(["open", url])
            #expect(try await app.request(.get, "/v1/me", token: carol.token).jsonObject()["email_verified"] as? Bool == false)
            let visit = try await Browser.run(["click", url])
            #expect(visit.after?.heading == "Your email address is confirmed", "\(String(describing: visit.after))")
            #expect(try await app.request(.get, "/v1/me", token: carol.token).jsonObject()["email_verified"] as? Bool == true)

            // A form posted from elsewhere (no cookie from the page) is refused.
            let token = String(url.split(separator: "=").last ?? "")
            let port = server.port
            let forged = try await offThePool {
                try rawRequest(port: port, "POST", "/verify-email", form: "token=\(token)&csrf=guess")
            }
            #expect(forged.status == 403)
        }
    }
}
