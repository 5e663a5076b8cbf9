import Accounts
import BookwormCore
import Catalog
import Foundation
import Hummingbird

/// `/v1/me/readings…` and `/v1/users/{username}/readings` (API.md, Shelf).
package struct ReadingsRoutes: Sendable {
    let service: ReadingsService

    package init(service: ReadingsService) {
        self.service = service
    }

    package func addRoutes(optionallyAuthenticated group: RouterGroup<AppRequestContext>, authenticated: RouterGroup<AppRequestContext>) {
        authenticated.put("me/readings/:book_id", use: put)
        authenticated.post("me/readings", use: post)
        authenticated.get("me/readings", use: mine)
        authenticated.delete("me/readings/:book_id", use: delete)
        group.get("users/:username/readings", use: theirs)
    }

    @Sendable func put(_ request: Request, context: AppRequestContext) async throws -> Response {
        let user = try context.requireSession().user.id
        let book = try context.parameters.uuid("book_id")
        var request = request
        let input = try ReadingValidation.reading(try await request.decodeStrict(PutReadingBody.self, context: context))
        let (reading, created) = try await service.put(user: user, book: book, input)
        return try .json(reading, status: created ? .created : .ok, for: request)
    }

    @Sendable func post(_ request: Request, context: AppRequestContext) async throws -> Response {
        let user = try context.requireSession().user.id
        var request = request
        let body = try await request.decodeStrict(PostReadingBody.self, context: context)
        var errors: [FieldError] = []
        let isbn13 = try collectFieldErrors(&errors) { try CatalogValidation.isbnFilter(body.isbn) }
        let input = try collectFieldErrors(&errors) { try ReadingValidation.reading(body.reading) }
        guard errors.isEmpty, let isbn13, let input else { throw AppError.validation(errors) }
        let (reading, created) = try await service.put(user: user, isbn13: isbn13, newBook: {
            // Only a book the catalogue lacks needs them: a rule no schema can state (422).
            guard body.title != nil, body.authors != nil else {
                throw AppError.rule([FieldError("title", "and authors are needed for a book the catalogue does not have yet")])
            }
            return try CatalogValidation.book(isbn: body.isbn, title: body.title, authors: body.authors, publisher: nil, publishedYear: nil, language: nil,
                                             now: service.clock.now())
        }, input)
        return try .json(reading, status: created ? .created : .ok, for: request)
    }

    @Sendable func mine(_ request: Request, context: AppRequestContext) async throws -> Response {
        let user = try context.requireSession().user.id
        return try .json(try await service.mine(user: user, state: try Self.state(request), page: PageRequest(request)), for: request)
    }

    @Sendable func delete(_ request: Request, context: AppRequestContext) async throws -> Response {
        let user = try context.requireSession().user.id
        try await service.delete(user: user, book: try context.parameters.uuid("book_id"))
        return .noContent()
    }

    @Sendable func theirs(_ request: Request, context: AppRequestContext) async throws -> Response {
        let username = try context.parameters.require("username")
        return try .json(try await service.of(username: username, viewer: context.session?.user.id, state: try Self.state(request),
                                              page: PageRequest(request)), for: request)
    }

    static func state(_ request: Request) throws -> ReadingState? {
        try request.queryValue("state").map { raw in
            guard let state = ReadingState(rawValue: raw) else {
                throw AppError.invalid("state", "must be one of interested, reading, finished, abandoned")
            }
            return state
        }
    }
}
