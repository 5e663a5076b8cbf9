import Accounts
import BookwormCore
import Foundation
import Logging
import Mail
import Metrics
import PostgresNIO

/// What every alert job holds: the database, the alert SQL, alert mail, the wish policy, the clock.
package struct AlertJobParts: Sendable {
    let client: Database
    let alerts: AlertsStore
    let mail: AlertMail
    let policy: WishPolicy
    let clock: any AppClock
    let logger: Logger

    package init(client: Database, outbox: OutboxStore, push: PushQueue, templates: MailTemplates, policy: WishPolicy,
                 notify: NotifyPolicy, clock: any AppClock, logger: Logger) {
        self.client = client
        self.alerts = AlertsStore(client: client, logger: logger)
        let budget = NotifyBudget(throttles: ThrottleStore(client: client, logger: logger, clock: clock), policy: notify)
        self.mail = AlertMail(alerts: alerts, outbox: outbox, push: push, templates: templates, budget: budget)
        self.policy = policy
        self.clock = clock
        self.logger = logger
    }
}

/// `alerts.copy`: a copy became available (a trigger queued this job in the same transaction:
/// `copies_inserted` for new copies, per statement, `copies_queue_alerts` for changed ones).
/// The runner's claimed jobs of this kind run together: one statement finds which of their
/// copies are on offer and wished for (`AlertsStore.offered`), and the rest, most of an import's
/// copies, are done with it; one job a copy had cost a transaction and a delete each. Wishes for
/// a wished copy's work are examined in batches, each batch one short transaction that writes
/// its alerts and queues their mail, so a book wished by thousands never holds locks for long
/// and a crash resumes without duplicates (an alert is unique per wish and copy, and only
/// alerts actually written are mailed).
package struct AlertFanOut: BatchJobHandler {
    package let kind = "alerts.copy"
    let parts: AlertJobParts
    package init(_ parts: AlertJobParts) { self.parts = parts }

    /// A job that fails is retried with backoff, its error kept on its row.
    package func run(_ jobs: [ClaimedJob]) async -> [UUID: JobOutcome] {
        var outcomes: [UUID: JobOutcome] = [:]
        var copies: [(job: ClaimedJob, copy: UUID)] = []
        for job in jobs {
            if let copy = UUID(uuidString: job.key) { copies.append((job, copy)) } else { outcomes[job.id] = .done }
        }
        guard !copies.isEmpty else { return outcomes }
        let offered: Set<UUID>
        do {
            offered = try await parts.alerts.offered(copies.map(\.copy))
        } catch {
            for (job, _) in copies { outcomes[job.id] = failed(job, error) }
            return outcomes
        }
        for (job, copy) in copies {
            guard offered.contains(copy) else {
                outcomes[job.id] = .done
                continue
            }
            do {
                try await fanOut(copy)
                outcomes[job.id] = .done
            } catch {
                outcomes[job.id] = failed(job, error)
            }
        }
        return outcomes
    }

    private func failed(_ job: ClaimedJob, _ error: any Error) -> JobOutcome {
        Counter(label: "bookworm_jobs_failures_total", dimensions: [("kind", kind)]).increment()
        parts.logger.warning("job failed; retrying", metadata: ["kind": .string(kind), "key": .string(job.key),
                                                             "error": .string(String(reflecting: error))])
        return .retry(at: parts.clock.now().addingTimeInterval(JobRunner.backoff(attempts: job.attempts)),
                      reason: String(reflecting: error))
    }

    /// The copy's availability is read again in each batch's transaction: it may have changed
    /// since `offered`.
    private func fanOut(_ copy: UUID) async throws {
        var after: UUID?
        repeat {
            let start = after
            after = try await parts.client.transaction(logger: parts.logger) { connection in
                let now = parts.clock.now()
                guard let offered = try await parts.alerts.offer(copy, on: connection) else { return nil }
                let (last, written) = try await parts.alerts.fanOut(offered, after: start, limit: parts.policy.fanOutBatch, now: now,
                                                                    on: connection)
                if !written.isEmpty { try await parts.mail.handle(written, from: offered.owner, now: now, on: connection) }
                return last
            }
        } while after != nil
    }
}

/// `alerts.wish`: a user made wishes (the `wishes_queue_alerts` trigger queued this job, keyed by
/// the user, in the same transaction). For every wish of theirs not yet looked at, alerts for
/// the nearest copies already on offer are written, and mailed as one fan-out batch's are: one
/// mail for a whole import. One transaction.
package struct NewWishAlerts: JobHandler {
    package let kind = "alerts.wish"
    package let recurringKey: String? = nil
    let parts: AlertJobParts
    package init(_ parts: AlertJobParts) { self.parts = parts }

    package func run(_ job: ClaimedJob) async throws -> JobOutcome {
        guard let user = UUID(uuidString: job.key) else { return .done }
        try await parts.client.transaction(logger: parts.logger) { connection in
            let now = parts.clock.now()
            var written: [NewAlert] = []
            for wish in try await parts.alerts.takeUncheckedWishes(of: user, on: connection) {
                written += try await parts.alerts.forNewWish(wish, limit: parts.policy.alertsPerNewWish, now: now, on: connection)
            }
            if !written.isEmpty { try await parts.mail.handle(written, from: nil, now: now, on: connection) }
        }
        return .done
    }
}

/// `alerts.digest`: once a day at the digest hour, every user with alerts not mailed yet (those
/// whose preference is `daily`) gets one mail listing them all, one transaction per user. The
/// job row is leased to one runner at a time, so no two digests of one day go out.
package struct AlertDigest: JobHandler {
    package let kind = "alerts.digest"
    package let recurringKey: String? = "daily"
    let parts: AlertJobParts
    package init(_ parts: AlertJobParts) { self.parts = parts }

    package func firstRun(after now: Date) -> Date { parts.policy.nextDigest(after: now) }

    package func run(_ job: ClaimedJob) async throws -> JobOutcome {
        var after: UUID?
        while true {
            let users = try await parts.alerts.usersAwaitingDigest(after: after, limit: 500)
            guard let last = users.last else { break }
            for user in users { try await digest(user) }
            after = last
        }
        return .again(at: parts.policy.nextDigest(after: parts.clock.now()))
    }

    private func digest(_ user: UUID) async throws {
        try await parts.client.transaction(logger: parts.logger) { connection in
            let pending = try await parts.alerts.unmailed(user: user, on: connection)
            let current = pending.filter(\.current).map(\.alert)
            // Someone who switched to `off` (or never verified) gets nothing; the alerts are settled.
            if let first = current.first, first.verified, first.preference != "off" {
                try await parts.mail.digest(current, on: connection)
            }
            try await parts.alerts.markMailed(pending.map(\.alert.id), now: parts.clock.now(), on: connection)
        }
    }
}

/// Alert mail, by each wisher's preference: `instant` queues one mail per wisher and fan-out
/// batch now, `daily` leaves the alerts for the day's digest, `off` queues nothing. Unverified
/// addresses get nothing. A copy's owner sets off a fan-out by listing it, so its instant mail
/// and push draw on the owner's notify budget for that wisher: past it, the alerts are still
/// written and told to the app's live stream, but nothing is mailed or pushed.
struct AlertMail: Sendable {
    /// A digest lists this many alerts and counts the rest.
    static let digestListed = 50

    let alerts: AlertsStore
    let outbox: OutboxStore
    let push: PushQueue
    let templates: MailTemplates
    let budget: NotifyBudget

    /// `sender`: the owner whose copy set the alerts off, or nil when the wisher did (a new wish).
    func handle(_ written: [NewAlert], from sender: UUID?, now: Date, on connection: PostgresConnection) async throws {
        var messages: [MailMessage] = []
        var settled: [UUID] = []
        var pushes: [PushMessage] = []
        let byUser = Dictionary(grouping: written, by: \.user)
        let wantNow = byUser.compactMap { user, theirs in theirs.first?.preference == "instant" ? user : nil }
        var allowed = Set(wantNow)
        if let sender { allowed = try await budget.spendEach(from: sender, to: wantNow, on: connection) }
        for (user, theirs) in byUser {
            guard let first = theirs.first else { continue }
            // Instant alerts push too (unverified addresses included: the phone is not the mail);
            // a digest's are told by the digest.
            if first.preference == "instant", allowed.contains(user) { pushes.append(Self.push(theirs)) }
            switch (first.preference, first.verified) {
            case ("daily", true):
                continue
            case ("instant", true) where allowed.contains(user):
                messages.append(instant(theirs))
                settled += theirs.map(\.id)
            default:
                settled += theirs.map(\.id)
            }
        }
        if !messages.isEmpty { _ = try await outbox.enqueue(messages, kind: .alert, on: connection) }
        try await alerts.markMailed(settled, now: now, on: connection)
        // The app hears of every new alert at once, whatever the mail preference.
        try await LiveNotice.publish(written.map { LiveNotice(userID: $0.user, event: "alert", objectID: $0.id, kind: "available") },
                                     on: connection, logger: alerts.logger)
        try await push.enqueue(pushes, on: connection)
    }

    /// One push per wisher and batch, saying what the instant mail's subject and first line say.
    static func push(_ alerts: [NewAlert]) -> PushMessage {
        let first = alerts[0]
        let books = Set(alerts.map(\.title)).count
        let title = books == 1 ? "\"\(first.title)\" is available near you" : "\(books) books you wish for are available near you"
        let body = "\"\(first.title)\", offered by \(first.owner), \(String(format: "%.1f", first.distanceKm)) km away"
            + (alerts.count > 1 ? ", and \(alerts.count - 1) more" : "")
        return PushMessage(userID: first.user, category: "alerts", title: title, body: body, kind: "alert", objectID: first.id)
    }

    private func instant(_ alerts: [NewAlert]) -> MailMessage {
        let first = alerts[0]
        // A new wish's alerts are often copies of one book: that is one book available, not several.
        let books = Set(alerts.map(\.title)).count
        let subject = books == 1 ? "\"\(first.title)\" is available near you" : "\(books) books you wish for are available near you"
        // An import's wishes can bring hundreds: list as many as a digest does.
        let listed = Array(alerts.prefix(Self.digestListed))
        var text = "A book you wish for is on offer near you:\n\n\(Self.lines(listed))"
        if alerts.count > listed.count { text += "\n…and \(alerts.count - listed.count) more in the app." }
        return templates.notice(to: first.email, recipient: first.username, subject: subject, text: text + "\n\nOpen Bookworm to ask for it.")
    }

    func digest(_ alerts: [NewAlert], on connection: PostgresConnection) async throws {
        guard let first = alerts.first else { return }
        let listed = Array(alerts.prefix(Self.digestListed))
        var text = "Since your last digest, books you wish for came up near you:\n\n\(Self.lines(listed))"
        if alerts.count > listed.count { text += "\n…and \(alerts.count - listed.count) more in the app." }
        let subject = alerts.count == 1 ? "Your Bookworm digest: 1 book near you" : "Your Bookworm digest: \(alerts.count) books near you"
        _ = try await outbox.enqueue(templates.notice(to: first.email, recipient: first.username, subject: subject, text: text),
                                     kind: .alert, on: connection)
    }

    static func lines(_ alerts: [NewAlert]) -> String {
        alerts.map { "- \"\($0.title)\", offered by \($0.owner), \(String(format: "%.1f", $0.distanceKm)) km away" }
            .joined(separator: "\n")
    }
}
