import BookwormCore
import Catalog
import Foundation
import Logging
import Places
import PostgresNIO

/// Wishes, alerts and matches: what I want, who near me has it, whom I could swap with.
package struct WishesService: Sendable {
    let client: Database
    let wishes: WishesStore
    let alerts: AlertsStore
    let matches: MatchesStore
    let books: BooksStore
    let pins: PinsStore
    let policy: WishPolicy
    let clock: any AppClock
    let logger: Logger

    package init(client: Database, policy: WishPolicy, clock: any AppClock, logger: Logger) {
        self.client = client
        self.wishes = WishesStore(client: client, logger: logger)
        self.alerts = AlertsStore(client: client, logger: logger)
        self.matches = MatchesStore(client: client, logger: logger)
        self.books = BooksStore(client: client, logger: logger)
        self.pins = PinsStore(client: client, logger: logger)
        self.policy = policy
        self.clock = clock
        self.logger = logger
    }

    /// Checked and inserted under a lock on the wisher's row: the limit of 200 holds for parallel
    /// requests, and the unique key makes a duplicate a 409 however it races.
    /// With a client-made id that exists: that wish when it is the user's with the same book and
    /// settings, else `ClientMadeID.conflict`.
    func create(user: UUID, _ wish: NewWish) async throws -> Made<WishView> {
        try await client.transaction(logger: logger) { connection in
            let count = try await wishes.lockAndCount(user: user, on: connection)
            let book = try await resolve(wish.book, on: connection)
            if let id = wish.id, let same = try await wishes.isSame(id, user: user, book: book, wish, on: connection) {
                guard same, let view = try await wishes.get(id, user: user, on: connection) else { throw ClientMadeID.conflict }
                return Made(view, isNew: false)
            }
            guard count < policy.maxWishesPerUser else {
                throw AppError.unprocessableBecause(code: "too_many_wishes",
                                                    detail: "You have \(count) wishes, the most there can be; delete one first",
                                                    field: nil)
            }
            if let pin = wish.pinID {
                guard try await pins.isOwned(pin, by: user, on: connection) else {
                    throw AppError.broken("pin_id", "\(pin.apiString) is not one of your pins")
                }
            } else if try await !wishes.hasDefaultPin(user: user, on: connection) {
                throw AppError.unprocessableBecause(code: "pin_required",
                                                    detail: "A wish is measured from a pin: give pin_id, or set a default pin first",
                                                    field: "pin_id")
            }
            guard let id = try await wishes.insert(user: user, book: book, wish, now: clock.now(), on: connection) else {
                // The client's id taken by another user's wish (ours was answered above), or the book wished for already.
                if let id = wish.id, try await wishes.isSame(id, user: user, book: book, wish, on: connection) != nil {
                    throw ClientMadeID.conflict
                }
                throw AppError.conflict(code: "duplicate_wish", detail: "You already wish for this book", field: "book_id")
            }
            guard let view = try await wishes.get(id, user: user, on: connection) else {
                throw AppError.unavailable("the wish could not be read back")
            }
            return Made(view, isNew: true)
        }
    }

    private func resolve(_ book: WishedBook, on connection: PostgresConnection) async throws -> UUID {
        switch book {
        case .id(let id):
            guard try await books.exists(id, on: connection) else { throw AppError.broken("book_id", "no book with id \(id.apiString)") }
            return id
        case .isbn13(let isbn13):
            guard let id = try await books.id(isbn13: isbn13, on: connection) else {
                throw AppError.broken("isbn", "no book in the catalogue has this ISBN; add it with POST /v1/books first")
            }
            return id
        }
    }

    /// The wishes of `user` among `ids` (delta sync).
    package func owned(_ ids: [UUID], user: UUID) async throws -> [UUID: WishView] {
        try await wishes.owned(ids, user: user)
    }

    func delete(user: UUID, wish: UUID) async throws {
        // A transaction for one statement, so that an Idempotency-Key's answer is kept with it.
        try await client.transaction(logger: logger) { connection in
            guard try await wishes.delete(wish, user: user, on: connection) else { throw AppError.notFound("No wish with id \(wish.apiString)") }
        }
    }

    func mine(user: UUID, page: PageRequest) async throws -> Page<WishView> {
        page.page(try await wishes.list(user: user, after: page.after, limit: page.limit + 1), cursor: \.cursor, item: { $0 })
    }

    func alerts(user: UUID, page: PageRequest) async throws -> Page<AlertView> {
        page.page(try await alerts.list(user: user, after: page.after, limit: page.limit + 1), cursor: \.cursor, item: { $0 })
    }

    /// Two-way partners around my default pin.
    func matches(user: UUID, radiusKm: Double, limit: Int) async throws -> Page<MatchView> {
        guard let origin = try await matches.origin(of: user) else {
            throw AppError.unprocessableBecause(code: "pin_required", detail: "Matches are measured from your default pin: set one first",
                                                field: nil)
        }
        return Page(data: try await matches.partners(of: user, origin: origin, radiusKm: radiusKm, limit: limit))
    }
}
