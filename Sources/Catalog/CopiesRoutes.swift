import Accounts
import BookwormCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Places
import PostgresNIO

/// `/v1/me/copies`, `/v1/copies*`, `/v1/users/{username}/copies`.
package struct CopiesRoutes: Sendable {
    let service: CopiesService
    let users: AccountsStore
    /// The library and someone's copies: the read replica's when there is one.
    let library: CopiesService
    let publicUsers: AccountsStore
    let clock: any AppClock

    package init(service: CopiesService, users: AccountsStore, clock: any AppClock, library: CopiesService? = nil,
                 publicUsers: AccountsStore? = nil) {
        self.service = service
        self.clock = clock
        self.users = users
        self.library = library ?? service
        self.publicUsers = publicUsers ?? users
    }

    package func addRoutes(public group: RouterGroup<AppRequestContext>, optionallyAuthenticated: RouterGroup<AppRequestContext>,
                   authenticated: RouterGroup<AppRequestContext>) {
        optionallyAuthenticated.get("copies", use: library)
        optionallyAuthenticated.get("copies/:id", use: get)
        optionallyAuthenticated.get("users/:username/copies", use: userCopies)
        authenticated.post("me/copies", use: create)
        authenticated.get("me/copies", use: mine)
        authenticated.patch("copies/:id", use: update)
        authenticated.delete("copies/:id", use: delete)
    }

    @Sendable func library(_ request: Request, context: AppRequestContext) async throws -> Response {
        let page = try PageRequest(request)
        var filter = CopyFilter()
        filter.words = CatalogValidation.searchWords(try request.queryText("q"))
        filter.isbn13 = try request.queryText("isbn", maxLength: 20).map(CatalogValidation.isbnFilter)
        filter.condition = try request.queryText("condition").map { try CatalogValidation.condition($0).rawValue }
        filter.viewerID = context.session?.user.id
        return try .json(try await library.list(filter, page: page), for: request)
    }

    @Sendable func userCopies(_ request: Request, context: AppRequestContext) async throws -> Response {
        let username = try context.parameters.require("username")
        guard username.count <= 30, let user = try await publicUsers.findByUsername(username, visibleTo: context.session?.user.id) else {
            throw AppError.notFound("No user named \(username.prefix(30))")
        }
        var filter = CopyFilter()
        filter.ownerID = user.id
        return try .json(try await library.list(filter, page: PageRequest(request)), for: request)
    }

    @Sendable func mine(_ request: Request, context: AppRequestContext) async throws -> Response {
        var filter = CopyFilter()
        filter.ownerID = try context.requireSession().user.id
        filter.includeAllStatuses = true
        return try .json(try await service.list(filter, page: PageRequest(request)), for: request)
    }

    /// Withdrawn copies are the owner's business only; others get 404, as for a hidden copy.
    @Sendable func get(_ request: Request, context: AppRequestContext) async throws -> Response {
        let id = try context.parameters.uuid("id")
        return try .json(try await service.visible(id, viewer: context.session?.user.id), for: request)
    }

    /// From `book_id`, or from `isbn`/`title`/`authors` (find-or-create), in one transaction.
    @Sendable func create(_ request: Request, context: AppRequestContext) async throws -> Response {
        let owner = try context.requireSession().user.id
        var request = request
        let body = try await request.decodeStrict(CreateCopyBody.self, context: context)
        let condition = try CatalogValidation.condition(body.condition)
        let notes = try CatalogValidation.notes(body.notes)
        let book: BookChoice
        switch (body.bookID, body.isbn ?? body.title) {
        case (.some, .some): throw AppError.broken("book_id", "give either book_id or isbn/title/authors, not both")
        case (nil, nil): throw AppError.broken("book_id", "give book_id, or isbn/title/authors")
        case (.some(let id), nil): book = .existing(id)
        case (nil, .some(let isbn)) where !isbn.allSatisfy({ $0 == " " }) && body.title == nil && body.authors == nil
            && body.publisher == nil && body.publishedYear == nil && body.language == nil:
            // A scanned barcode alone: the catalogue's book with that ISBN.
            book = .isbn(try CatalogValidation.isbn(isbn))
        case (nil, .some):
            // Optional in the schema, required together here: a rule, not a malformed body.
            if body.title == nil { throw AppError.broken("title", "is required to describe a book (with authors)") }
            if body.authors == nil { throw AppError.broken("authors", "is required to describe a book (with title)") }
            book = .described(try CatalogValidation.book(isbn: body.isbn, title: body.title, authors: body.authors,
                                                         publisher: body.publisher, publishedYear: body.publishedYear,
                                                         language: body.language, now: clock.now()))
        }
        let made = try await service.create(id: try ClientMadeID.checked(body.id), owner: owner, book: book, condition: condition,
                                            notes: notes, pinID: body.pinID)
        return try .json(made.view, status: made.isNew ? .created : .ok, for: request)
    }

    @Sendable func update(_ request: Request, context: AppRequestContext) async throws -> Response {
        let owner = try context.requireSession().user.id
        let id = try context.parameters.uuid("id")
        var request = request
        let body = try await request.decodeStrict(UpdateCopyBody.self, context: context)
        let condition = try body.condition.map(CatalogValidation.condition)
        let status = try body.status.map(CatalogValidation.status)
        var notes = body.notes
        if case .set(let value) = notes { notes = .set(try CatalogValidation.notes(value)) }
        let copy = try await service.update(owner: owner, id: id, condition: condition, status: status, notes: notes,
                                            pinID: body.pinID)
        return try .json(copy, for: request)
    }

    @Sendable func delete(_ request: Request, context: AppRequestContext) async throws -> Response {
        let owner = try context.requireSession().user.id
        let id = try context.parameters.uuid("id")
        try await service.delete(owner: owner, id: id)
        return .noContent()
    }
}
