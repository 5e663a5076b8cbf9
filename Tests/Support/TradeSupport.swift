import Foundation
import Logging
import HummingbirdTesting
import PostgresNIO
@testable import Accounts
@testable import BookwormCore
@testable import Mail
@testable import Exchange
@testable import BookwormApp

// Trades made through the API, used by the exchange tests.
extension TestApp {
    /// Registers a user whose address counts as verified (the mail round trip is tested elsewhere).
    func registerTrader() async throws -> Account {
        // An address of its own, so many traders in one test stay under the registration throttle.
        let address = "10.\(Int.random(in: 0...255)).\(Int.random(in: 0...255)).\(Int.random(in: 1...254))"
        let account = try await register(from: address)
        try await db.query("UPDATE users SET email_verified_at = now() WHERE id = \(UUID(uuidString: account.id))")
        return account
    }

    func copyID(_ token: String, title: String = "A Book") async throws -> String {
        let copy = try await addCopy(token, title: title)
        guard let id = copy["id"] as? String else { throw TestFailure("copy without id") }
        return id
    }

    /// `POST /v1/trades`; a loan is due in 30 days unless `dueOn` says otherwise.
    func requestTrade(_ token: String, copy: String, kind: String = "gift", offered: String? = nil, dueOn: String? = nil,
                      message: String? = nil) async throws -> TestResponse {
        var body: [String: any Sendable] = ["copy_id": copy, "kind": kind]
        if let offered { body["offered_copy_id"] = offered }
        if kind == "loan" { body["due_on"] = dueOn ?? day(after: 30) }
        if let message { body["message"] = message }
        return try await request(.post, "/v1/trades", json: body, token: token)
    }

    func trade(_ token: String, copy: String, kind: String = "gift", offered: String? = nil) async throws -> String {
        let response = try await requestTrade(token, copy: copy, kind: kind, offered: offered)
        guard response.status == .created, let id = try response.jsonObject()["id"] as? String else {
            throw TestFailure("trade request: \(response.status) \(String(buffer: response.body))")
        }
        return id
    }

    @discardableResult
    func act(_ action: String, _ trade: String, _ token: String, json: [String: any Sendable]? = nil) async throws -> TestResponse {
        try await request(.post, "/v1/trades/\(trade)/\(action)", json: json, token: token)
    }

    func tradeState(_ trade: String) async throws -> String {
        for try await state in try await db.query("SELECT state FROM trades WHERE id = \(UUID(uuidString: trade))").decode(String.self) {
            return state
        }
        throw TestFailure("no trade \(trade)")
    }

    func copyRow(_ copy: String) async throws -> (owner: String, status: String) {
        let rows = try await db.query("""
            SELECT u.username, c.status FROM copies c JOIN users u ON u.id = c.owner_id WHERE c.id = \(UUID(uuidString: copy))
            """)
        for try await (owner, status) in rows.decode((String, String).self) { return (owner, status) }
        throw TestFailure("no copy \(copy)")
    }

    /// The UTC calendar day `days` after the app's clock, `YYYY-MM-DD`.
    func day(after days: Int) -> String {
        TradesStore.dateString(clock.now().addingTimeInterval(Double(days) * 86400))
    }

    /// The trade job runner on this test's database and clock (the app's own runner is off in tests).
    func jobRunner(policy: TradePolicy = TradePolicy(), notify: NotifyPolicy = NotifyPolicy()) -> JobRunner {
        var config = Config.forTests(settings)
        config.clock = clock
        config.trades = policy
        config.notify = notify
        return backgroundJobs(client: db, config: config, logger: Logger(label: "test-jobs"))
    }

    /// Runs every due job once, as a worker would after the clock moved.
    func runJobs(notify: NotifyPolicy = NotifyPolicy()) async throws {
        let runner = jobRunner(notify: notify)
        try await runner.prepare()
        while try await runner.runDue() > 0 {}
    }

    /// Queued trade mails: (recipient, subject).
    func tradeMails() async throws -> [(to: String, subject: String)] {
        var mails: [(String, String)] = []
        let rows = try await db.query("SELECT recipient, subject FROM outbox_messages WHERE kind = 'trade' ORDER BY created_at, id")
        for try await (to, subject) in rows.decode((String, String).self) { mails.append((to, subject)) }
        return mails.map { (to: $0.0, subject: $0.1) }
    }
}
