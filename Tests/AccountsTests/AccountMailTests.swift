import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import BookwormCore
@testable import Accounts
@testable import BookwormTestSupport

@Suite struct AccountMailTests {
    @Test func registrationCodeArrivesOverSMTPAndVerifiesTheAddress() async throws {
        try await withSink { sink in
            try await withApp { app in
                let account = try await app.register()
                #expect(try await app.request(.get, "/v1/me", token: account.token).jsonObject()["email_verified"] as? Bool == false)
                try await app.deliver(to: sink)
                let mail = try #require(sink.messages().first)
                #expect(mail.envelopeTo == account.email)
                #expect(mail.header("To") == account.email)
                #expect(mail.header("Content-Type") == "text/plain; charset=utf-8")
                #expect(mail.header("Message-ID")?.hasPrefix("<") == true)
                let code = try #require(mail.body.firstMatch(of: /\b(\d{6})\b/)?.1)
                #expect(mail.header("Subject")?.contains(code) == false)
                let verify = try await app.request(.post, "/v1/auth/verify-email", json: ["code": String(code)], token: account.token)
                #expect(verify.status == .noContent)
                #expect(try await app.request(.get, "/v1/me", token: account.token).jsonObject()["email_verified"] as? Bool == true)
                #expect(try await app.request(.post, "/v1/auth/verify-email/resend", token: account.token).status == .conflict)
                #expect(try await app.outboxStatuses() == ["sent"])
            }
        }
    }

    @Test func aCodeDiesAfterFiveWrongTriesAndAResendReplacesIt() async throws {
        try await withSink { sink in
            try await withApp { app in
                let account = try await app.register()
                try await app.deliver(to: sink)
                let code = String(try #require(sink.messages().first?.body.firstMatch(of: /\b(\d{6})\b/)?.1))
                let wrong = code == "000000" ? "000001" : "000000"
                for _ in 0..<5 {
                    let response = try await app.request(.post, "/v1/auth/verify-email", json: ["code": wrong], token: account.token)
                    #expect(response.status == .unprocessableContent)
                    #expect(try response.problemFields() == ["code"])
                }
                // The right code no longer works once the tries are spent.
                #expect(try await app.request(.post, "/v1/auth/verify-email", json: ["code": code], token: account.token).status == .unprocessableContent)
                #expect(try await app.request(.post, "/v1/auth/verify-email", json: ["code": "12ab"], token: account.token).status == .badRequest)
                #expect(try await app.request(.post, "/v1/auth/verify-email/resend", token: account.token).status == .accepted)
                try await app.deliver(to: sink)
                let fresh = String(try #require(sink.messages().last?.body.firstMatch(of: /\b(\d{6})\b/)?.1))
                #expect(sink.messages().count == 2)
                #expect(try await app.request(.post, "/v1/auth/verify-email", json: ["code": fresh], token: account.token).status == .noContent)
            }
        }
    }

    @Test func passwordResetWorksOnceEndToEndAndSignsEverythingOut() async throws {
        try await withSink { sink in
            try await withApp(configure: { $0.mail.publicBaseURL = "https://books.example.org" }) { app in
                let account = try await app.register()
                try await app.deliver(to: sink)
                let known = try await app.request(.post, "/v1/auth/password-reset", json: ["email": account.email.uppercased()])
                let unknown = try await app.request(.post, "/v1/auth/password-reset", json: ["email": "nobody@example.org"])
                #expect(known.status == .accepted)
                #expect(unknown.status == .accepted)
                #expect(String(buffer: known.body) == String(buffer: unknown.body))
                try await app.deliver(to: sink)
                let mails = sink.messages()
                #expect(mails.count == 2)
                let reset = try #require(mails.last)
                #expect(reset.envelopeTo == account.email)
                let token = String(try #require(reset.body.firstMatch(of: /https:\/\/books\.example\.org\/reset-password\?token=(rst_[A-Za-z0-9_-]+)/)?.1))

                let weak = try await app.request(.post, "/v1/auth/password-reset/confirm", json: ["token": token, "new_password": "short"])
                #expect(weak.status == .badRequest)
                let confirm = try await app.request(.post, "/v1/auth/password-reset/confirm",
                                                    json: ["token": token, "new_password": "a brand new password"])
                #expect(confirm.status == .noContent)
                #expect(try await app.request(.get, "/v1/me", token: account.token).status == .unauthorized)
                let again = try await app.request(.post, "/v1/auth/password-reset/confirm",
                                                  json: ["token": token, "new_password": "another new password"])
                #expect(again.status == .unprocessableContent)
                #expect(try again.problemFields() == ["token"])
                let old = try await app.request(.post, "/v1/auth/login", json: ["login": account.username, "password": account.password])
                #expect(old.status == .unauthorized)
                let login = try await app.request(.post, "/v1/auth/login", json: ["login": account.username, "password": "a brand new password"])
                #expect(login.status == .ok)
                #expect((try login.jsonObject()["user"] as? [String: Any])?["email_verified"] as? Bool == true)
            }
        }
    }

    @Test func resetTokensExpireAndAreStoredOnlyAsHashes() async throws {
        try await withSink { sink in
            try await withApp { app in
                let account = try await app.register()
                try await app.request(.post, "/v1/auth/password-reset", json: ["email": account.email])
                try await app.deliver(to: sink)
                let reset = try #require(sink.messages().last)
                let token = String(try #require(reset.body.firstMatch(of: /token=(rst_[A-Za-z0-9_-]+)/)?.1))
                for try await stored in try await app.db.query("SELECT encode(token_hash, 'escape') FROM password_resets").decode(String.self) {
                    #expect(!stored.contains(token))
                }
                app.clock.advance(by: VerificationStore.resetLifetime + 1)
                let late = try await app.request(.post, "/v1/auth/password-reset/confirm",
                                                 json: ["token": token, "new_password": "a brand new password"])
                #expect(late.status == .unprocessableContent)
                #expect(try await app.request(.get, "/v1/me", token: account.token).status == .ok)
            }
        }
    }
}
