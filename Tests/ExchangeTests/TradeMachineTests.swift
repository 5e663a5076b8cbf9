import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing
@testable import Accounts
@testable import BookwormCore
@testable import Exchange
@testable import BookwormTestSupport

/// Every state × action × actor, over HTTP, against the rules of API.md written out by hand
/// here (so a wrong row in `TradeMachine.table` fails too).
@Suite struct TradeMachineTests {
    enum Setup: String, CaseIterable {
        case requested, counteredByOwner, accepted, completed, returned, declined, cancelled, expired
    }

    static func allowed(kind: String, setup: Setup, role: String) -> Set<String> {
        switch (setup, role) {
        case (.requested, "owner"): kind == "swap" ? ["accept", "decline", "cancel", "counter"] : ["accept", "decline", "cancel"]
        case (.requested, _): ["cancel"]
        case (.counteredByOwner, "requester"): ["accept", "decline", "cancel", "counter"]
        case (.counteredByOwner, _): ["cancel"]
        case (.accepted, _): ["confirm", "cancel"]
        case (.completed, "owner"): kind == "loan" ? ["return"] : []
        default: []
        }
    }

    static func state(after action: String, from setup: Setup) -> String {
        switch action {
        case "accept": "accepted"
        case "decline": "declined"
        case "cancel": "cancelled"
        case "counter": "requested"
        case "confirm": "accepted" // the other side has not confirmed yet
        case "return": "returned"
        default: setup.rawValue
        }
    }

    @Test(arguments: ["gift", "swap", "loan"])
    func everyActionInEveryStateForEitherParticipantFollowsTheTable(kind: String) async throws {
        // Dozens of trades between one pair: the notify budget (NotifyBudgetTests) is not what this is about.
        try await withApp(configure: { $0.notify = NotifyPolicy(perRecipientPerDay: 10_000, perSenderPerHour: 10_000) }) { app in
            let owner = try await app.registerTrader(), requester = try await app.registerTrader()
            let setups = Setup.allCases.filter { ($0 != .counteredByOwner || kind == "swap") && ($0 != .returned || kind == "loan") }
            for setup in setups {
                for role in ["owner", "requester"] {
                    let token = role == "owner" ? owner.token : requester.token
                    let allowed = Self.allowed(kind: kind, setup: setup, role: role)
                    for action in ["accept", "decline", "cancel", "counter", "confirm", "return"] {
                        let trade = try await make(app, kind: kind, setup: setup, owner: owner, requester: requester)
                        let before = try await app.tradeState(trade)
                        let view = try await app.request(.get, "/v1/trades/\(trade)", token: token).jsonObject()
                        #expect(Set(view["actions"] as? [String] ?? []) == allowed, "\(kind) \(setup) \(role)")
                        var body: [String: any Sendable]?
                        if action == "counter" { body = ["offered_copy_id": try await app.copyID(requester.token, title: "Spare")] }
                        let response = try await app.act(action, trade, token, json: body)
                        let label = "\(kind) \(setup) \(role) \(action)"
                        if allowed.contains(action) {
                            #expect(response.status == .ok, "\(label): \(String(buffer: response.body))")
                            #expect(try await app.tradeState(trade) == Self.state(after: action, from: setup), "\(label)")
                        } else {
                            #expect(response.status == .conflict, "\(label)")
                            let problem = try response.jsonObject()
                            #expect(problem["type"] as? String == "https://bookworm.example/problems/invalid_transition", "\(label)")
                            #expect(problem["state"] as? String == before && problem["action"] as? String == action, "\(label)")
                            #expect(try await app.tradeState(trade) == before, "\(label)")
                        }
                    }
                }
            }
        }
    }

    @Test func onlyOpenTradesExpire() {
        for state in TradeState.allCases {
            for kind in TradeKind.allCases {
                let expires = TradeMachine.transition(from: state, action: .expire, kind: kind, role: nil, proposalBy: .requester)
                #expect((expires?.to == .expired) == state.isOpen)
                #expect(TradeMachine.transition(from: state, action: .expire, kind: kind, role: .owner, proposalBy: .requester) == nil)
            }
        }
    }

    @Test func theReadmeShowsTheTableTheCodeRuns() throws {
        let readme = try String(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../README.md").standardized, encoding: .utf8)
        #expect(readme.contains(TradeMachine.markdown()))
    }

    /// A fresh trade (on a fresh copy) in `setup`'s state.
    func make(_ app: TestApp, kind: String, setup: Setup, owner: TestApp.Account, requester: TestApp.Account) async throws -> String {
        let copy = try await app.copyID(owner.token)
        let offered = kind == "swap" ? try await app.copyID(requester.token, title: "Offer") : nil
        let trade = try await app.trade(requester.token, copy: copy, kind: kind, offered: offered)
        var steps: [(String, String, [String: any Sendable]?)] = []
        switch setup {
        case .requested: break
        case .counteredByOwner: steps = [("counter", owner.token, ["offered_copy_id": try await app.copyID(requester.token, title: "Other")])]
        case .accepted: steps = [("accept", owner.token, nil)]
        case .completed: steps = [("accept", owner.token, nil), ("confirm", owner.token, nil), ("confirm", requester.token, nil)]
        case .returned: steps = [("accept", owner.token, nil), ("confirm", owner.token, nil), ("confirm", requester.token, nil),
                                 ("return", owner.token, nil)]
        case .declined: steps = [("decline", owner.token, nil)]
        case .cancelled: steps = [("cancel", requester.token, nil)]
        case .expired:
            // Past the sweep's own interval, so the recurring job is due again.
            app.clock.advance(by: 61)
            try await app.db.query("UPDATE trades SET expires_at = \(app.clock.now().addingTimeInterval(-1)) WHERE id = \(UUID(uuidString: trade))")
            try await app.runJobs()
        }
        for (action, token, body) in steps {
            let response = try await app.act(action, trade, token, json: body)
            guard response.status == .ok else { throw TestFailure("setup \(setup) \(action): \(String(buffer: response.body))") }
        }
        guard try await app.tradeState(trade) == (setup == .counteredByOwner ? "requested" : setup.rawValue) else {
            throw TestFailure("setup \(setup) did not reach its state")
        }
        return trade
    }
}
