import Accounts
import BookwormCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// `PUT /v1/copies/{id}/photo` and `GET /v1/photos/{id}`.
package struct PhotosRoutes: Sendable {
    let service: PhotosService
    /// The process's upload budget, shared with imports.
    let pace: UploadPace?

    static let maxUploadBytes = 10 << 20
    static let accepted: Set<String> = ["image/jpeg", "image/png", "image/webp", "image/heic", "image/heif"]

    package init(service: PhotosService, pace: UploadPace? = nil) {
        self.service = service
        self.pace = pace
    }

    package func addRoutes(public group: RouterGroup<AppRequestContext>, authenticated: RouterGroup<AppRequestContext>) {
        group.get("photos/:id", use: photo)
        authenticated.put("copies/:id/photo", use: put)
    }

    /// libvips tells the format from the bytes; `Content-Type` must name one we take.
    @Sendable func put(_ request: Request, context: AppRequestContext) async throws -> Response {
        let owner = try context.requireSession().user.id
        let id = try context.parameters.uuid("id")
        let declared = request.headers[.contentType]?.split(separator: ";").first
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        guard let declared, Self.accepted.contains(declared) else {
            throw AppError.unsupportedMediaType("Content-Type must be one of \(Self.accepted.sorted().joined(separator: ", "))")
        }
        let upload = try await request.collectLimitedBody(limit: Self.maxUploadBytes, pace: pace)
        let (photoID, made) = try await service.set(owner: owner, copy: id, upload: upload)
        return try .json(PhotoAnswer(photoURL: "/v1/photos/\(photoID)",
                                     photo: PhotoInfo(id: photoID, width: made.width, height: made.height, blurhash: made.blurhash)),
                         for: request)
    }

    /// Content-addressed, so the bytes behind an id, size and format never change: cache forever.
    @Sendable func photo(_ request: Request, context: AppRequestContext) async throws -> Response {
        let id = try context.parameters.require("id").lowercased()
        let size = try request.queryText("size").map { value in
            guard let size = MadePhoto.Size(rawValue: value) else { throw AppError.invalid("size", "must be thumb, card or full") }
            return size
        } ?? .full
        let format: MadePhoto.Format = Self.acceptsWebP(request.headers[values: .accept]) ? .webp : .jpeg
        let etag = "\"\(id)-\(size.rawValue)-\(format.rawValue)\""
        var headers: HTTPFields = [.eTag: etag, .cacheControl: "public, max-age=31536000, immutable", .vary: "Accept"]
        if let condition = request.headers[.ifNoneMatch], ETagMatch.matches(condition, etag: etag) {
            return Response(status: .notModified, headers: headers)
        }
        let bytes = try await service.file(id, size: size, format: format)
        headers[.contentType] = format == .webp ? "image/webp" : "image/jpeg"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: bytes))
    }

    /// Whether `Accept` lists `image/webp` (with a q above 0).
    static func acceptsWebP(_ values: [String]) -> Bool {
        values.flatMap { $0.split(separator: ",") }.contains { range in
            let parts = range.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard parts.first == "image/webp" else { return false }
            return !parts.dropFirst().contains { $0.replacingOccurrences(of: " ", with: "").range(of: #"^q=0(\.0*)?$"#, options: .regularExpression) != nil }
        }
    }
}

/// What `PUT /v1/copies/{id}/photo` answers.
struct PhotoAnswer: Encodable {
    let photoURL: String
    let photo: PhotoInfo

    enum CodingKeys: String, CodingKey {
        case photoURL = "photo_url", photo
    }
}
