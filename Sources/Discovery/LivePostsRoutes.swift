import BookwormCore
import Foundation
import Hummingbird

/// `GET /v1/posts/live?latitude=&longitude=&radius_km=` (signed in, as the nearby feed is):
/// new posts within the radius as they are written. The first event, `ready`, carries the
/// cursor from which `GET /v1/posts` pages what was written before.
package struct LivePostsRoutes: Sendable {
    let streams: LiveStreams
    let store: LivePostsStore

    package init(streams: LiveStreams, store: LivePostsStore) {
        self.streams = streams
        self.store = store
    }

    package func addRoutes(authenticated: RouterGroup<AppRequestContext>) {
        authenticated.get("posts/live", use: live)
    }

    @Sendable func live(_ request: Request, context: AppRequestContext) async throws -> Response {
        _ = try context.requireSession()
        guard let area = try PostsRoutes.area(request) else {
            throw AppError.validation([FieldError("latitude", "is required"), FieldError("longitude", "is required")])
        }
        let topic = LiveStream.Topic.posts(latitude: area.origin.latitude, longitude: area.origin.longitude, radiusKm: area.radiusKm)
        return try await streams.serve(topic, request, context: context) { _ in
            ServerSentEvent(event: "ready", data: ServerSentEvent.json(["cursor": try await store.cursorAboveNow().encoded]), retryMilliseconds: 3000)
        }
    }
}
