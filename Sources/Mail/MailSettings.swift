import BookwormCore
import Foundation
import Logging

/// Where mail goes and how the outbox worker behaves (README, Configuration).
package struct MailSettings: Sendable {
    /// nil: the maildir transport under the data folder.
    var smtpURL: String?
    var smtpTimeoutSeconds = 30
    package var from = "Bookworm <no-reply@bookworm.localhost>"
    /// Where password-reset links point.
    package var publicBaseURL = "http://127.0.0.1:8080"
    package var outbox = OutboxPolicy()

    package init() {}

    package static func fromEnvironment(_ reader: EnvironmentReader, defaults: MailSettings) throws -> MailSettings {
        var settings = defaults
        settings.smtpURL = reader.string("SMTP_URL")
        settings.smtpTimeoutSeconds = try reader.int("SMTP_TIMEOUT_SECONDS", range: 1...600) ?? defaults.smtpTimeoutSeconds
        settings.from = reader.string("MAIL_FROM") ?? defaults.from
        guard MailAddress.isValid(MailAddress.split(settings.from).address), !settings.from.contains("\r"), !settings.from.contains("\n") else {
            throw ConfigError(variable: "MAIL_FROM", message: "expected an address such as 'Bookworm <no-reply@example.org>'")
        }
        settings.publicBaseURL = reader.string("PUBLIC_BASE_URL") ?? defaults.publicBaseURL
        guard let base = URL(string: settings.publicBaseURL), ["http", "https"].contains(base.scheme ?? "") else {
            throw ConfigError(variable: "PUBLIC_BASE_URL", message: "expected an http(s) URL")
        }
        settings.outbox.batchSize = try reader.int("BOOKWORM_MAIL_BATCH", range: 1...1000) ?? defaults.outbox.batchSize
        settings.outbox.maxAttempts = try reader.int("BOOKWORM_MAIL_MAX_ATTEMPTS", range: 1...100) ?? defaults.outbox.maxAttempts
        settings.outbox.baseDelay = try reader.int("BOOKWORM_MAIL_RETRY_BASE_SECONDS", range: 1...86_400).map(Double.init)
            ?? defaults.outbox.baseDelay
        settings.outbox.pollInterval = try reader.int("BOOKWORM_MAIL_POLL_SECONDS", range: 1...3600).map(Double.init)
            ?? defaults.outbox.pollInterval
        settings.outbox.lease = try reader.int("BOOKWORM_MAIL_LEASE_SECONDS", range: 5...86_400).map(Double.init)
            ?? defaults.outbox.lease
        settings.outbox.failedRetentionDays = try reader.int("BOOKWORM_MAIL_FAILED_RETENTION_DAYS", range: 1...3650)
            ?? defaults.outbox.failedRetentionDays
        if let url = settings.smtpURL { _ = try SMTPSettings(url: url, timeoutSeconds: settings.smtpTimeoutSeconds) }
        return settings
    }

    /// SMTP when `SMTP_URL` is set, else one `.eml` file per message under `dataDirectory/mail`.
    package func transport(dataDirectory: String, logger: Logger) throws -> any MailTransport {
        if let smtpURL {
            return SMTPTransport(settings: try SMTPSettings(url: smtpURL, timeoutSeconds: smtpTimeoutSeconds))
        }
        let base = dataDirectory.hasPrefix("/") ? dataDirectory : FileManager.default.currentDirectoryPath + "/" + dataDirectory
        return MaildirTransport(directory: base + "/mail", logger: logger)
    }

    /// Never the SMTP password.
    package var transportDescription: String {
        guard let smtpURL else { return "maildir" }
        return (try? SMTPSettings(url: smtpURL, timeoutSeconds: smtpTimeoutSeconds).description) ?? "smtp (invalid SMTP_URL)"
    }
}
