import BookwormCore
import Foundation
import HTTPTypes
import Hummingbird
import PostgresNIO

/// `/v1/books` (API.md, Catalog).
package struct BooksRoutes: Sendable {
    package let books: BooksStore
    let clock: any AppClock

    package init(books: BooksStore, clock: any AppClock) {
        self.books = books
        self.clock = clock
    }

    package func addRoutes(public group: RouterGroup<AppRequestContext>, authenticated: RouterGroup<AppRequestContext>) {
        group.get("books", use: list)
        group.get("books/:id", use: get)
        authenticated.post("books", use: create)
    }

    @Sendable func list(_ request: Request, context: AppRequestContext) async throws -> Response {
        let page = try PageRequest(request)
        let isbn = try request.queryText("isbn", maxLength: 20).map(CatalogValidation.isbnFilter)
        let words = CatalogValidation.searchWords(try request.queryText("q"))
        let rows = try await books.list(isbn13: isbn, words: words, limit: page.limit + 1, after: page.after)
        return try .json(page.page(rows, cursor: \.0, item: \.1), for: request)
    }

    @Sendable func get(_ request: Request, context: AppRequestContext) async throws -> Response {
        let id = try context.parameters.uuid("id")
        guard var book = try await books.get(id) else { throw AppError.notFound("No book with id \(id.apiString)") }
        book.editions = try await books.editions(of: id)
        return try .json(book, for: request)
    }

    /// Find-or-create by ISBN: 201 when new, 200 with the existing edition otherwise.
    @Sendable func create(_ request: Request, context: AppRequestContext) async throws -> Response {
        _ = try context.requireSession()
        var request = request
        let body = try await request.decodeStrict(CreateBookBody.self, context: context)
        let newBook = try CatalogValidation.book(isbn: body.isbn, title: body.title, authors: body.authors,
                                                 publisher: body.publisher, publishedYear: body.publishedYear,
                                                 language: body.language, now: clock.now())
        let (book, created) = try await books.findOrCreate(newBook)
        return try .json(book, status: created ? .created : .ok, for: request)
    }
}
