import Foundation
import HTTPTypes
import Hummingbird

extension Response {
    /// A JSON response with a strong ETag over its bytes; a GET whose `If-None-Match` matches
    /// gets 304 with no body.
    package static func json<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok, for request: Request) throws -> Response {
        try JSONEncoder.api.encode(value).withUnsafeBytes { json(bytes: $0, status: status, for: request) }
    }

    /// The same bytes for the pages clients fetch most, written by `JSONWriter`.
    package static func json<T: Encodable & JSONWritable>(_ value: T, status: HTTPResponse.Status = .ok, for request: Request) throws -> Response {
        var writer = JSONWriter(capacity: 32_768)
        value.write(to: &writer)
        return writer.withBytes { json(bytes: $0, status: status, for: request) }
    }

    private static func json(bytes: UnsafeRawBufferPointer, status: HTTPResponse.Status, for request: Request) -> Response {
        let etag = Digest.etag(bytes)
        var headers: HTTPFields = [.contentType: "application/json; charset=utf-8", .eTag: etag]
        if request.method == .get || request.method == .head, status == .ok,
           let condition = request.headers[.ifNoneMatch], ETagMatch.matches(condition, etag: etag) {
            headers[.contentType] = nil
            return Response(status: .notModified, headers: headers)
        }
        headers[.cacheControl] = "private, no-cache"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    package static func noContent() -> Response {
        Response(status: .noContent)
    }
}

package enum ETagMatch {
    /// RFC 9110 weak comparison over a comma-separated list, `*` matching anything.
    package static func matches(_ header: String, etag: String) -> Bool {
        let candidates = header.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        return candidates.contains { candidate in
            candidate == "*" || strip(candidate) == strip(etag)
        }
    }

    private static func strip(_ tag: String) -> String {
        tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag
    }
}
