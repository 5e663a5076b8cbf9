import Accounts
import BookwormCore
import Discovery
import Foundation
import HTTPTypes
import Hummingbird

/// `/v1/trades…`, `/v1/me/trades` and `/v1/copies/{id}/journey` (API.md, Trades). Every action
/// route goes through `TradesService.act`, which asks `TradeMachine` whether it is allowed.
package struct TradesRoutes: Sendable {
    let service: TradesService

    package init(service: TradesService) {
        self.service = service
    }

    package func addRoutes(optionallyAuthenticated: RouterGroup<AppRequestContext>, authenticated: RouterGroup<AppRequestContext>) {
        authenticated.post("trades", use: create)
        authenticated.get("trades/:id", use: get)
        authenticated.get("me/trades", use: list)
        for action in [TradeAction.accept, .decline, .cancel, .confirm, .return] {
            authenticated.post("trades/:id/\(action.rawValue)") { request, context in
                try await act(action, request, context)
            }
        }
        authenticated.post("trades/:id/counter", use: counter)
        authenticated.post("trades/:id/rating", use: rate)
        optionallyAuthenticated.get("copies/:id/journey", use: journey)
    }

    @Sendable func create(_ request: Request, context: AppRequestContext) async throws -> Response {
        let requester = try context.requireSession().user
        var request = request
        let body = try await request.decodeStrict(CreateTradeBody.self, context: context)
        let trade = try await service.request(try TradeValidation.newTrade(body, today: service.clock.now()), by: requester)
        return try .json(trade, status: .created, for: request)
    }

    @Sendable func get(_ request: Request, context: AppRequestContext) async throws -> Response {
        let viewer = try context.requireSession().user.id
        return try .json(try await service.get(try context.parameters.uuid("id"), viewer: viewer), for: request)
    }

    @Sendable func list(_ request: Request, context: AppRequestContext) async throws -> Response {
        let viewer = try context.requireSession().user.id
        let role = try request.queryValue("role").map { raw in
            guard let role = TradeListRole(rawValue: raw) else { throw AppError.invalid("role", "must be incoming or outgoing") }
            return role
        }
        let state = try request.queryValue("state").map { raw in
            guard let state = TradeState(rawValue: raw) else {
                throw AppError.invalid("state", "must be one of \(TradeState.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            return state
        }
        // The position carries "waiting for me" above the time, so it is read as it is.
        let after = try request.queryValue("cursor").map { try Cursor(encoded: $0, raw: true) }
        let page = try await service.list(viewer: viewer, role: role, state: state, after: after, limit: try PageRequest.limit(request))
        return try .json(page, for: request)
    }

    func act(_ action: TradeAction, _ request: Request, _ context: AppRequestContext) async throws -> Response {
        let user = try context.requireSession().user.id
        guard let trade = try await service.act(action, on: try context.parameters.uuid("id"), by: user) else {
            throw AppError.unavailable("the trade could not be read back")
        }
        return try .json(trade, for: request)
    }

    @Sendable func counter(_ request: Request, context: AppRequestContext) async throws -> Response {
        let user = try context.requireSession().user.id
        let id = try context.parameters.uuid("id")
        var request = request
        let body = try await request.decodeStrict(CounterBody.self, context: context)
        guard let trade = try await service.act(.counter, on: id, by: user, offeredCopy: body.offeredCopyID) else {
            throw AppError.unavailable("the trade could not be read back")
        }
        return try .json(trade, for: request)
    }

    @Sendable func rate(_ request: Request, context: AppRequestContext) async throws -> Response {
        let user = try context.requireSession().user.id
        let id = try context.parameters.uuid("id")
        var request = request
        let body = try await request.decodeStrict(RatingBody.self, context: context)
        let (score, comment) = try TradeValidation.rating(body)
        return try .json(try await service.rate(id, by: user, score: score, comment: comment), status: .created, for: request)
    }

    @Sendable func journey(_ request: Request, context: AppRequestContext) async throws -> Response {
        let steps = try await service.journey(of: try context.parameters.uuid("id"), viewer: context.session?.user.id)
        return try .json(["data": steps], for: request)
    }
}

/// Field rules for trade bodies (API.md, Trades): 400 for what the schema says, 422 for rules.
enum TradeValidation {
    static func newTrade(_ body: CreateTradeBody, today now: Date) throws -> NewTrade {
        var errors: [FieldError] = []
        let kind = TradeKind(rawValue: body.kind)
        if kind == nil { errors.append(FieldError("kind", "must be one of gift, swap, loan")) }
        let message = try collectFieldErrors(&errors) {
            try body.message.map { try FeedValidation.body($0, field: "message", maxLength: 1000) }
        } ?? nil
        let due = try collectFieldErrors(&errors) { try body.dueOn.map { try date($0, field: "due_on") } } ?? nil
        guard errors.isEmpty, let kind else { throw AppError.validation(errors) }
        var rules: [FieldError] = []
        if kind == .swap, body.offeredCopyID == nil { rules.append(FieldError("offered_copy_id", "is required for a swap")) }
        if kind != .swap, body.offeredCopyID != nil { rules.append(FieldError("offered_copy_id", "is only for swaps")) }
        if kind == .loan {
            if let due {
                let today = try date(TradesStore.dateString(now), field: "due_on")
                let days = due.timeIntervalSince(today) / 86400
                if days < 1 { rules.append(FieldError("due_on", "must be after today")) }
                if days > 365 { rules.append(FieldError("due_on", "must be at most 365 days ahead")) }
            } else {
                rules.append(FieldError("due_on", "is required for a loan"))
            }
        } else if due != nil {
            rules.append(FieldError("due_on", "is only for loans"))
        }
        if body.offeredCopyID != nil, body.offeredCopyID == body.copyID { rules.append(FieldError("offered_copy_id", "must be another copy")) }
        guard rules.isEmpty else { throw AppError.rule(rules) }
        return NewTrade(copyID: body.copyID, kind: kind, offeredCopyID: body.offeredCopyID, dueOn: due, message: message)
    }

    /// A calendar date, `YYYY-MM-DD`, as midnight UTC; `field` names it in a refusal.
    static func date(_ raw: String, field: String) throws -> Date {
        let parts = raw.split(separator: "-", omittingEmptySubsequences: false)
        guard raw.utf8.count == 10, parts.count == 3, parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
              let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]) else {
            throw AppError.invalid(field, "must be a date, YYYY-MM-DD")
        }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        let components = DateComponents(year: year, month: month, day: day)
        // The shape is the schema's; a day that does not exist is a rule (422).
        guard components.isValidDate(in: calendar), let date = calendar.date(from: components) else {
            throw AppError.broken(field, "is not a calendar date")
        }
        return date
    }

    static func rating(_ body: RatingBody) throws -> (Int, String?) {
        var errors: [FieldError] = []
        if !(1...5).contains(body.score) { errors.append(FieldError("score", "must be a whole number from 1 to 5")) }
        let comment = try collectFieldErrors(&errors) {
            try body.comment.map { try FeedValidation.body($0, field: "comment", maxLength: 500) }
        } ?? nil
        guard errors.isEmpty else { throw AppError.validation(errors) }
        return (body.score, comment)
    }
}
