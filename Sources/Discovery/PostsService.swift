import Accounts
import BookwormCore
import Foundation
import Logging
import Places
import PostgresNIO

/// The feed's use cases. Writing a post checks and inserts in one transaction under a
/// per-author lock: the hourly limit and the duplicate rule hold even for parallel requests,
/// and a refused post leaves no trace.
package struct PostsService: Sendable {
    let client: Database
    let posts: PostsStore
    /// The feed's reads, on the replica when there is one.
    let feedPosts: PostsStore
    let pins: PinsStore
    let throttles: ThrottleStore
    let policy: FeedPolicy
    let logger: Logger

    static let rateWindow: TimeInterval = 3600

    package init(client: Database, reads: Database? = nil, throttles: ThrottleStore, policy: FeedPolicy, logger: Logger) {
        self.client = client
        self.posts = PostsStore(client: client, logger: logger)
        self.feedPosts = PostsStore(client: reads ?? client, logger: logger)
        self.pins = PinsStore(client: client, logger: logger)
        self.throttles = throttles
        self.policy = policy
        self.logger = logger
    }

    package func feed(_ filter: FeedFilter, page: PageRequest) async throws -> Page<PostView> {
        page.page(try await feedPosts.list(filter, limit: page.limit + 1, after: page.after), cursor: \.cursor, item: { $0 })
    }

    /// A post hidden by reports, or by a suspended author, is there for its author only.
    package func get(_ id: UUID, viewer: UUID?) async throws -> PostView {
        let notFound = AppError.notFound("No post with id \(id.apiString)")
        guard let (post, shown) = try await posts.detail(id), post.author.id == viewer || shown else { throw notFound }
        return post
    }

    /// With a client-made id that exists: that post when it is the author's with the same
    /// content, else `ClientMadeID.conflict`; checked before the duplicate and rate rules, which
    /// would otherwise refuse the replay.
    package func create(author: UUID, post: NewPost) async throws -> Made<PostView> {
        let rateKey = "post:user:" + author.apiString
        return try await client.transaction(logger: logger) { connection in
            try await throttles.lock(key: rateKey, on: connection)
            if let id = post.id, let same = try await posts.isSame(id, authorID: author, post: post, on: connection) {
                guard same, let view = try await posts.get(id, connection: connection) else { throw ClientMadeID.conflict }
                return Made(view, isNew: false)
            }
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
            return Made(view, isNew: true)
        }
    }

    package func delete(author: UUID, id: UUID) async throws {
        try await client.transaction(logger: logger) { connection in
            try await posts.lockOwned(id, by: author, on: connection)
            try await posts.delete(id, on: connection)
        }
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
}
