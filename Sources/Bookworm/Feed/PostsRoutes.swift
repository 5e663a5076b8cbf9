import Foundation
import HTTPTypes
import Hummingbird
import PostgresNIO

/// `/v1/posts` (API.md, Feed). Reading the feed needs no account; a location-filtered feed
/// does, as nearby copies do, since distances to people are what trilateration feeds on.
struct PostsRoutes: Sendable {
    let client: PostgresClient
    let posts: PostsStore
    let pins: PinsStore
    let throttles: ThrottleStore
    let policy: FeedPolicy

    static let rateWindow: TimeInterval = 3600

    func addRoutes(optionallyAuthenticated group: RouterGroup<AppRequestContext>, authenticated: RouterGroup<AppRequestContext>) {
        group.get("posts", use: feed)
        group.get("posts/:id", use: get)
        authenticated.post("posts", use: create)
        authenticated.delete("posts/:id", use: delete)
    }

    @Sendable func feed(_ request: Request, context: AppRequestContext) async throws -> Response {
        let page = try PageRequest(request)
        var filter = FeedFilter()
        var errors: [FieldError] = []
        filter.kind = collectFieldErrors(&errors) { try request.queryText("kind").map(FeedValidation.kind) } ?? nil
        filter.author = collectFieldErrors(&errors) { try request.queryText("author", maxLength: 30) } ?? nil
        filter.bookID = collectFieldErrors(&errors) { try Self.uuidParameter(request, "book_id") } ?? nil
        filter.near = collectFieldErrors(&errors) { try Self.area(request) } ?? nil
        guard errors.isEmpty else { throw AppError.validation(errors) }
        if filter.near != nil { _ = try context.requireSession() }
        filter.viewerID = context.session?.user.id
        return try .json(try await posts.list(filter, page: page), for: request)
    }

    @Sendable func get(_ request: Request, context: AppRequestContext) async throws -> Response {
        let id = try context.parameters.uuid("id")
        guard let post = try await posts.get(id) else { throw AppError.notFound("No post with id \(id.apiString)") }
        return try .json(post, for: request)
    }

    /// Checks and insert share one transaction under a per-author lock: the hourly limit and
    /// the duplicate rule hold even for parallel requests, and a refused post leaves no trace.
    @Sendable func create(_ request: Request, context: AppRequestContext) async throws -> Response {
        let author = try context.requireSession().user.id
        var request = request
        let post = try FeedValidation.newPost(try await request.decodeStrict(CreatePostBody.self, context: context))
        let rateKey = "post:user:" + author.apiString
        let view = try await client.transaction(logger: context.logger) { connection in
            try await throttles.lock(key: rateKey, on: connection)
            if try await posts.isDuplicate(authorID: author, body: post.body, within: policy.duplicateWindow, on: connection) {
                throw AppError.conflict(code: "duplicate-post",
                                        detail: "You posted this text less than \(Int(policy.duplicateWindow)) seconds ago",
                                        field: "body")
            }
            if let seconds = try await throttles.retryAfter(key: rateKey, limit: policy.postsPerHour,
                                                            window: Self.rateWindow, on: connection) {
                throw AppError.throttled(retryAfterSeconds: seconds)
            }
            let bookID = try await resolveBook(post, author: author, on: connection)
            if let pinID = post.pinID, try await !pins.isOwned(pinID, by: author, on: connection) {
                throw AppError.unprocessable("pin_id: \(pinID.apiString) is not one of your pins")
            }
            let view = try await posts.insert(authorID: author, post: post, bookID: bookID, on: connection)
            try await throttles.record(keys: [rateKey], window: Self.rateWindow, on: connection)
            return view
        }
        return try .json(view, status: .created, for: request)
    }

    @Sendable func delete(_ request: Request, context: AppRequestContext) async throws -> Response {
        let author = try context.requireSession().user.id
        let id = try context.parameters.uuid("id")
        try await client.transaction(logger: context.logger) { connection in
            try await posts.lockOwned(id, by: author, on: connection)
            try await posts.delete(id, on: connection)
        }
        return .noContent()
    }

    /// A linked copy must be the author's and decides the book; a book named alongside it must
    /// be that copy's book.
    private func resolveBook(_ post: NewPost, author: UUID, on connection: PostgresConnection) async throws -> UUID? {
        if let copyID = post.copyID {
            guard let copy = try await posts.copyOwnerAndBook(copyID, on: connection), copy.owner == author else {
                throw AppError.unprocessable("copy_id: \(copyID.apiString) is not one of your copies")
            }
            if let bookID = post.bookID, bookID != copy.book {
                throw AppError.unprocessable("book_id: does not match the book of copy \(copyID.apiString)")
            }
            return copy.book
        }
        if let bookID = post.bookID, try await !posts.bookExists(bookID, on: connection) {
            throw AppError.unprocessable("book_id: no book with id \(bookID.apiString)")
        }
        return post.bookID
    }

    static func uuidParameter(_ request: Request, _ name: String) throws -> UUID? {
        guard let raw = try request.queryText(name, maxLength: 64) else { return nil }
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
        guard errors.isEmpty else { throw AppError.validation(errors) }
        let (origin, radius) = try NearbyRoutes.parseArea(request)
        return NearbyArea(origin: origin, radiusKm: radius)
    }
}
