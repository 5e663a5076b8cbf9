import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTPTypes
import Synchronization

/// `Expect: 100-continue` (RFC 9110 §10.1.1). A client that asks before it sends a large body
/// (curl does above 1 MiB) waits for `100 Continue`, or about a second without one: every
/// import and photo upload from such a client lost that second. The interim answer goes out
/// when the handler first reads the body, so a request refused on its head alone (401, 413,
/// 415) is answered before the client sends a byte of it; that answer says `Connection: close`,
/// since the body the client may still send is only read to be thrown away. Any other
/// expectation is a 417. HTTPTypes drops the request's version, so an HTTP/1.0 client that sends
/// the header (the RFC says to ignore it there) is answered as a 1.1 one.
///
/// It runs outside `ProblemMiddleware`, so that a refusal thrown inside is already a response
/// when it decides on `Connection: close`.
package struct ExpectContinueMiddleware: RouterMiddleware {
    package typealias Context = AppRequestContext

    package init() {}

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let expect = request.headers[.expect] else { return try await next(request, context) }
        // A list (§5.6.1): repeated or empty members are allowed.
        let members = expect.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty }
        guard !members.isEmpty else { return try await next(request, context) }
        guard members.allSatisfy({ $0 == "100-continue" }) else {
            let error = AppError.expectationFailed(field: "Expect", detail: "only 100-continue is supported")
            return try ProblemMiddleware.problemResponse(for: error, request: request, context: context)
        }
        var request = request
        let body = ContinueOnFirstRead(body: request.body, channel: context.channel)
        request.body = RequestBody(asyncSequence: body)
        var response = try await next(request, context)
        if !body.pending.sent && Self.declaresBody(request.headers) { response.headers[.connection] = "close" }
        return response
    }

    static func declaresBody(_ headers: HTTPFields) -> Bool {
        headers[.transferEncoding] != nil || (headers[.contentLength].flatMap(Int.init) ?? 0) > 0
    }
}

/// The request's body, which answers `100 Continue` on the connection the first time anyone
/// reads it (once, however many iterators are made). Handlers read a body before they answer,
/// so the interim head always goes out before the final one.
struct ContinueOnFirstRead: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let body: RequestBody
    let channel: any Channel
    let pending = Pending()

    final class Pending: Sendable {
        private let flag = Atomic(false)
        /// True for the first caller only.
        func take() -> Bool { !flag.exchange(true, ordering: .relaxed) }
        var sent: Bool { flag.load(ordering: .relaxed) }
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: RequestBody.AsyncIterator
        let channel: any Channel
        let pending: Pending

        mutating func next() async throws -> ByteBuffer? {
            if pending.take() {
                try await channel.writeAndFlush(HTTPResponsePart.head(HTTPResponse(status: .continue)))
            }
            return try await base.next()
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: body.makeAsyncIterator(), channel: channel, pending: pending)
    }
}
