import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PostgresNIO

/// `/v1/me/copies`, `/v1/copies*`, `/v1/photos/{id}`, `/v1/users/{username}/copies`.
struct CopiesRoutes: Sendable {
    let client: PostgresClient
    let books: BooksStore
    let copies: CopiesStore
    let photos: PhotosStore
    let users: AccountsStore
    let pins: PinsStore

    static let maxPhotoBytes = 5 << 20

    func addRoutes(public group: RouterGroup<AppRequestContext>, optionallyAuthenticated: RouterGroup<AppRequestContext>,
                   authenticated: RouterGroup<AppRequestContext>) {
        optionallyAuthenticated.get("copies", use: library)
        group.get("copies/:id", use: get)
        group.get("photos/:id", use: photo)
        group.get("users/:username/copies", use: userCopies)
        authenticated.post("me/copies", use: create)
        authenticated.get("me/copies", use: mine)
        authenticated.patch("copies/:id", use: update)
        authenticated.delete("copies/:id", use: delete)
        authenticated.put("copies/:id/photo", use: putPhoto)
    }

    @Sendable func library(_ request: Request, context: AppRequestContext) async throws -> Response {
        let page = try PageRequest(request)
        var filter = CopyFilter()
        filter.words = CatalogValidation.searchWords(try request.queryText("q"))
        filter.isbn13 = try request.queryText("isbn", maxLength: 20).map(CatalogValidation.isbnFilter)
        filter.condition = try request.queryText("condition").map { try CatalogValidation.condition($0).rawValue }
        filter.viewerID = context.session?.user.id
        return try .json(try await copies.list(filter, page: page), for: request)
    }

    @Sendable func userCopies(_ request: Request, context: AppRequestContext) async throws -> Response {
        let username = try context.parameters.require("username")
        guard username.count <= 30, let user = try await users.findByUsername(username) else {
            throw AppError.notFound("No user named \(username.prefix(30))")
        }
        var filter = CopyFilter()
        filter.ownerID = user.id
        return try .json(try await copies.list(filter, page: PageRequest(request)), for: request)
    }

    @Sendable func mine(_ request: Request, context: AppRequestContext) async throws -> Response {
        var filter = CopyFilter()
        filter.ownerID = try context.requireSession().user.id
        filter.includeAllStatuses = true
        return try .json(try await copies.list(filter, page: PageRequest(request)), for: request)
    }

    /// Withdrawn copies are the owner's business only; others get 404.
    @Sendable func get(_ request: Request, context: AppRequestContext) async throws -> Response {
        let id = try context.parameters.uuid("id")
        guard let copy = try await copies.get(id), copy.status != CopyStatus.withdrawn.rawValue else {
            throw AppError.notFound("No copy with id \(id.apiString)")
        }
        return try .json(copy, for: request)
    }

    /// From `book_id`, or from `isbn`/`title`/`authors` (find-or-create), in one transaction.
    @Sendable func create(_ request: Request, context: AppRequestContext) async throws -> Response {
        let owner = try context.requireSession().user.id
        var request = request
        let body = try await request.decodeStrict(CreateCopyBody.self, context: context)
        let condition = try CatalogValidation.condition(body.condition)
        let notes = try CatalogValidation.notes(body.notes)
        let newBook: NewBook?
        switch (body.bookID, body.isbn ?? body.title) {
        case (.some, .some): throw AppError.invalid("book_id", "give either book_id or isbn/title/authors, not both")
        case (nil, nil): throw AppError.invalid("book_id", "give book_id, or isbn/title/authors")
        case (.some, nil): newBook = nil
        case (nil, .some):
            newBook = try CatalogValidation.book(isbn: body.isbn, title: body.title, authors: body.authors,
                                                 publisher: body.publisher, publishedYear: body.publishedYear, language: body.language)
        }
        let copy = try await client.transaction(logger: context.logger) { connection in
            var bookID = body.bookID
            if let newBook { bookID = try await books.findOrCreate(newBook, on: connection).0.id }
            guard let bookID else { throw AppError.invalid("book_id", "is required") }
            try await requireOwnPin(body.pinID, owner: owner, on: connection)
            return try await copies.create(ownerID: owner, bookID: bookID, condition: condition, notes: notes,
                                           pinID: body.pinID, on: connection)
        }
        return try .json(copy, status: .created, for: request)
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
        let copy = try await client.transaction(logger: context.logger) { connection in
            _ = try await copies.lockOwned(id, by: owner, on: connection)
            if case .set(let pin) = body.pinID { try await requireOwnPin(pin, owner: owner, on: connection) }
            try await copies.update(id, condition: condition, status: status, notes: notes, pinID: body.pinID, on: connection)
            return try await copies.get(id, connection: connection)
        }
        guard let copy else { throw AppError.notFound("No copy with id \(id.apiString)") }
        return try .json(copy, for: request)
    }

    @Sendable func delete(_ request: Request, context: AppRequestContext) async throws -> Response {
        let owner = try context.requireSession().user.id
        let id = try context.parameters.uuid("id")
        try await client.transaction(logger: context.logger) { connection in
            let photo = try await copies.lockOwned(id, by: owner, on: connection)
            try await copies.delete(id, on: connection)
            if let photo { try await photos.deleteIfOrphaned(photo, on: connection) }
        }
        return .noContent()
    }

    /// A copy may only be placed on one of its owner's own pins.
    private func requireOwnPin(_ pinID: UUID?, owner: UUID, on connection: PostgresConnection) async throws {
        guard let pinID else { return }
        guard try await pins.isOwned(pinID, by: owner, on: connection) else {
            throw AppError.unprocessable("pin_id: \(pinID.apiString) is not one of your pins")
        }
    }

    /// The type is taken from the bytes and must agree with `Content-Type`.
    @Sendable func putPhoto(_ request: Request, context: AppRequestContext) async throws -> Response {
        let owner = try context.requireSession().user.id
        let id = try context.parameters.uuid("id")
        let declared = request.headers[.contentType]?.split(separator: ";").first
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        guard let declared, ImageType.allowed.contains(declared) else {
            throw AppError.unsupportedMediaType("Content-Type must be one of \(ImageType.allowed.sorted().joined(separator: ", "))")
        }
        var request = request
        let data = try await request.collectLimitedBody(limit: Self.maxPhotoBytes)
        guard let sniffed = ImageType.sniff(data), sniffed == declared else {
            throw AppError.unsupportedMediaType("The body is not a \(declared) image")
        }
        let photoID = try await client.transaction(logger: context.logger) { connection in
            let previous = try await copies.lockOwned(id, by: owner, on: connection)
            let photoID = try await photos.put(ByteBuffer(bytes: data), contentType: sniffed, on: connection)
            try await copies.setPhoto(id, photoID: photoID, on: connection)
            if let previous, previous != photoID { try await photos.deleteIfOrphaned(previous, on: connection) }
            return photoID
        }
        return try .json(["photo_url": "/v1/photos/\(photoID)"], for: request)
    }

    /// Content-addressed, so the bytes behind an id never change: cache forever.
    @Sendable func photo(_ request: Request, context: AppRequestContext) async throws -> Response {
        let id = try context.parameters.require("id").lowercased()
        let etag = "\"\(id)\""
        if let condition = request.headers[.ifNoneMatch], ETagMatch.matches(condition, etag: etag) {
            return Response(status: .notModified, headers: [.eTag: etag, .cacheControl: "public, max-age=31536000, immutable"])
        }
        guard id.count == 64, let photo = try await photos.get(id) else { throw AppError.notFound("No photo with id \(id.prefix(64))") }
        return Response(status: .ok, headers: [.contentType: photo.contentType, .eTag: etag,
                                               .cacheControl: "public, max-age=31536000, immutable"],
                        body: .init(byteBuffer: photo.bytes))
    }
}

/// Recognises the accepted image formats by their magic numbers.
enum ImageType {
    static let allowed: Set<String> = ["image/jpeg", "image/png", "image/webp"]

    static func sniff(_ data: Data) -> String? {
        let bytes = [UInt8](data.prefix(12))
        if bytes.starts(with: [0xFF, 0xD8, 0xFF]) { return "image/jpeg" }
        if bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "image/png" }
        if bytes.count == 12, bytes.starts(with: Array("RIFF".utf8)), Array(bytes[8..<12]) == Array("WEBP".utf8) { return "image/webp" }
        return nil
    }
}
