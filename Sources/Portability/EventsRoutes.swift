import BookwormCore
import Foundation
import HTTPTypes
import Hummingbird

/// `GET /v1/me/events`: the signed-in user's event stream (API.md, Live updates). A `sync`
/// event is a poke: the client pulls `GET /v1/sync` with its own token. Its id is the sync
/// position, so a reconnect's `Last-Event-ID` says how far the client was told.
package struct EventsRoutes: Sendable {
    let streams: LiveStreams
    let sync: SyncStore
    /// Hands the dispatcher a change already committed but not yet below the sync horizon.
    let awaitingHorizon: @Sendable (UUID, UInt64) -> Void

    package init(streams: LiveStreams, sync: SyncStore, awaitingHorizon: @escaping @Sendable (UUID, UInt64) -> Void) {
        self.streams = streams
        self.sync = sync
        self.awaitingHorizon = awaitingHorizon
    }

    package func addRoutes(authenticated: RouterGroup<AppRequestContext>) {
        authenticated.get("me/events", use: events)
    }

    static let lastEventID = HTTPField.Name.constant("Last-Event-ID")

    @Sendable func events(_ request: Request, context: AppRequestContext) async throws -> Response {
        // Not a token of ours (a browser's id of another event, a token of a restored
        // database): the stream starts with a poke, as without one.
        let after = request.headers[Self.lastEventID].flatMap { try? SyncToken(encoded: $0) }
        // Registered first: whatever is notified from now on reaches it; what came before is
        // found by `resume`.
        return try await streams.serve(.mine, request, context: context) { stream in
            let (position, changed, waiting) = try await sync.resume(user: stream.userID, after: after)
            if let waiting { awaitingHorizon(stream.userID, waiting) }
            let token = position.encoded
            return changed
                ? ServerSentEvent(event: "sync", id: token, data: ServerSentEvent.json(["token": token]), retryMilliseconds: 3000)
                : ServerSentEvent(id: token, retryMilliseconds: 3000)
        }
    }
}
