import Accounts
import BookwormCore
import Foundation
import HTTPTypes
import Hummingbird
import Places
import PostgresNIO

/// `/v1/posts` (API.md, Feed). Reading the feed needs no account; a location-filtered feed
/// does, as nearby copies do, since distances to people are what trilateration feeds on.
package struct PostsRoutes: Sendable {
    let service: PostsService

    package init(service: PostsService) {
        self.service = service
    }

    package func addRoutes(optionallyAuthenticated group: RouterGroup<AppRequestContext>, authenticated: RouterGroup<AppRequestContext>) {
        group.get("posts", use: feed)
        group.get("posts/:id", use: get)
        authenticated.post("posts", use: create)
        authenticated.delete("posts/:id", use: delete)
    }

    @Sendable func feed(_ request: Request, context: AppRequestContext) async throws -> Response {
        let page = try PageRequest(request)
        var filter = FeedFilter()
        var errors: [FieldError] = []
        filter.kind = try collectFieldErrors(&errors) { try request.queryText("kind").map(FeedValidation.kind) } ?? nil
        filter.author = try collectFieldErrors(&errors) {
            try request.queryValue("author").map { raw in
                // As strict as the schema's pattern: a username exactly, not something that trims to one.
                guard raw.utf8.count <= 30, (try? AccountValidation.username(raw, field: "author")) == raw.lowercased() else {
                    throw AppError.invalid("author", "must be a username: 3 to 30 characters of a-z, 0-9 and _")
                }
                return raw
            }
        } ?? nil
        filter.bookID = try collectFieldErrors(&errors) { try Self.uuidParameter(request, "book_id") } ?? nil
        filter.near = try collectFieldErrors(&errors) { try Self.area(request) } ?? nil
        guard errors.isEmpty else { throw AppError.validation(errors) }
        if filter.near != nil { _ = try context.requireSession() }
        filter.viewerID = context.session?.user.id
        return try .json(try await service.feed(filter, page: page), for: request)
    }

    @Sendable func get(_ request: Request, context: AppRequestContext) async throws -> Response {
        let id = try context.parameters.uuid("id")
        return try .json(try await service.get(id, viewer: context.session?.user.id), for: request)
    }

    @Sendable func create(_ request: Request, context: AppRequestContext) async throws -> Response {
        let author = try context.requireSession().user.id
        var request = request
        let post = try FeedValidation.newPost(try await request.decodeStrict(CreatePostBody.self, context: context))
        let made = try await service.create(author: author, post: post)
        return try .json(made.view, status: made.isNew ? .created : .ok, for: request)
    }

    @Sendable func delete(_ request: Request, context: AppRequestContext) async throws -> Response {
        let author = try context.requireSession().user.id
        let id = try context.parameters.uuid("id")
        try await service.delete(author: author, id: id)
        return .noContent()
    }

    static func uuidParameter(_ request: Request, _ name: String) throws -> UUID? {
        guard let raw = request.queryValue(name) else { return nil }
        guard let id = UUID(uuidString: raw) else { throw AppError.invalid(name, "must be a UUID") }
        return id
    }

    /// `latitude` and `longitude` together (or neither), `radius_km` as for nearby copies.
    static func area(_ request: Request) throws -> NearbyArea? {
        let names = ["latitude", "longitude", "radius_km"]
        let given = try names.filter { try request.queryText($0, maxLength: 32) != nil }
        guard !given.isEmpty else { return nil }
        var errors: [FieldError] = []
        for name in ["latitude", "longitude"] where !given.contains(name) {
            errors.append(FieldError(name, "is required with \(given.joined(separator: ", "))"))
        }
        guard errors.isEmpty else { throw AppError.rule(errors) }
        let (origin, radius) = try NearbyRoutes.parseArea(request)
        return NearbyArea(origin: origin, radiusKm: radius)
    }
}
