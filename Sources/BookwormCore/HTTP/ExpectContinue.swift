import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTPTypes
import Synchronization

/// `Expect: 100-continue` (RFC 9110 §10.1.1). A client that asks before it sends a large body
/// (curl does above 1 MiB) waits for `100 Continue`, or about a second without one: every
/// import and photo upload from such a client lost that second. The interim answer goes out
/// when the handler first reads the body, so a request refused on its head alone (401, 413,
/// 415, 429) is answered before the client sends a byte of it. Any other expectation is a 417.
package struct ExpectContinueMiddleware: RouterMiddleware {
    package typealias Context = AppRequestContext

    package init() {}

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let expect = request.headers[.expect] else { return try await next(request, context) }
        guard expect.trimmingCharacters(in: .whitespaces).lowercased() == "100-continue" else {
            throw AppError.expectationFailed("Expect", "only 100-continue is supported")
        }
        var request = request
        request.body = RequestBody(asyncSequence: ContinueOnFirstRead(body: request.body, channel: context.channel))
        return try await next(request, context)
    }
}

/// The request's body, which answers `100 Continue` on the connection the first time anyone
/// reads it (once, however many iterators are made).
struct ContinueOnFirstRead: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let body: RequestBody
    let channel: any Channel
    let pending = Pending()

    final class Pending: Sendable {
        private let flag = Atomic(true)
        /// True for the first caller only.
        func take() -> Bool { flag.exchange(false, ordering: .relaxed) }
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
