import Accounts
import BookwormCore
import Catalog
import Foundation
import Logging
import PostgresNIO

/// The shelf's use cases: a reading is put on a book that exists, or on one found or created
/// by ISBN in the same transaction.
package struct ReadingsService: Sendable {
    let client: Database
    let readings: ReadingsStore
    let books: BooksStore
    let users: AccountsStore
    let clock: any AppClock
    let logger: Logger

    package init(client: Database, clock: any AppClock, logger: Logger) {
        self.client = client
        self.readings = ReadingsStore(client: client, logger: logger)
        self.books = BooksStore(client: client, logger: logger)
        self.users = AccountsStore(client: client, logger: logger)
        self.clock = clock
        self.logger = logger
    }

    func put(user: UUID, book: UUID, _ input: ReadingInput) async throws -> (ReadingView, created: Bool) {
        try await client.transaction(logger: logger) { connection in
            guard try await books.exists(book, on: connection) else { throw AppError.notFound("No book with id \(book.apiString)") }
            return try await save(user: user, book: book, input, on: connection)
        }
    }

    /// The book is found by ISBN; only a book the catalogue lacks needs `title` and `authors`.
    func put(user: UUID, isbn13: String, newBook: () throws -> NewBook, _ input: ReadingInput) async throws -> (ReadingView, created: Bool) {
        let existing = try await client.withConnection { try await books.id(isbn13: isbn13, on: $0) }
        let described = try existing == nil ? newBook() : nil
        return try await client.transaction(logger: logger) { connection in
            let book: UUID
            if let existing { book = existing } else if let described {
                book = try await books.findOrCreate(described, on: connection).0.id
            } else {
                throw AppError.unavailable("no book to put the reading on")
            }
            return try await save(user: user, book: book, input, on: connection)
        }
    }

    private func save(user: UUID, book: UUID, _ input: ReadingInput, on connection: PostgresConnection) async throws -> (ReadingView, created: Bool) {
        let created = try await readings.put(user: user, book: book, input, now: clock.now(), on: connection)
        guard let view = try await readings.get(user: user, book: book, on: connection) else {
            throw AppError.unavailable("the reading could not be read back")
        }
        return (view, created)
    }

    /// The readings of `user` among `books`, keyed by book (delta sync renders a page at once).
    package func owned(books: [UUID], user: UUID) async throws -> [UUID: ReadingView] {
        try await readings.owned(books: books, user: user)
    }

    func delete(user: UUID, book: UUID) async throws {
        // A transaction for one statement, so that an Idempotency-Key's answer is kept with it.
        try await client.transaction(logger: logger) { connection in
            guard try await readings.delete(user: user, book: book, on: connection) else {
                throw AppError.notFound("No reading of book \(book.apiString)")
            }
        }
    }

    func mine(user: UUID, state: ReadingState?, page: PageRequest) async throws -> Page<ReadingView> {
        page.page(try await readings.list(user: user, publicOnly: false, state: state, after: page.after, limit: page.limit + 1),
                  cursor: \.cursor, item: { $0 })
    }

    /// Someone's public shelf; to a signed-in viewer blocked either way, they do not exist.
    func of(username: String, viewer: UUID?, state: ReadingState?, page: PageRequest) async throws -> Page<ReadingView> {
        guard username.count <= 30, let user = try await users.findByUsername(username, visibleTo: viewer) else {
            throw AppError.notFound("No user named \(username.prefix(30))")
        }
        return page.page(try await readings.list(user: user.id, publicOnly: true, state: state, after: page.after, limit: page.limit + 1),
                         cursor: \.cursor, item: { $0 })
    }
}
