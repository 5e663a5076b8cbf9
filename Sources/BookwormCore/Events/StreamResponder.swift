import Hummingbird

/// The router's responder, except that the response of a long-lived request (an event stream)
/// is made in a child task.
///
/// A connection's task serves each of its requests, and Swift's task allocator keeps every slab
/// its async stack ever grew into until the task ends (swiftlang/swift, `StackAllocator`: a slab
/// is freed only by the allocator's destructor, or to make room for a larger one). A stream that
/// went through the middleware chain, the session lookup and its registration in the connection's
/// own task would hold those slabs for as long as it stays open. Here they belong to the child
/// and go back when the response is made; the body is then written from the connection's task,
/// whose stack stays shallow (a connection that served other requests first keeps what those
/// grew). `BookwormBench events` measures what an idle stream costs.
package struct StreamResponder<Inner: HTTPResponder>: HTTPResponder where Inner.Context == AppRequestContext {
    package typealias Context = AppRequestContext
    let inner: Inner
    let paths: Set<String>

    /// `paths`: the stream endpoints, in full (`/v1/me/events`).
    package init(_ inner: Inner, paths: Set<String>) {
        self.inner = inner
        self.paths = paths
    }

    package func respond(to request: Request, context: Context) async throws -> Response {
        guard Self.matches(request.uri.path, paths) else { return try await inner.respond(to: request, context: context) }
        async let response = inner.respond(to: request, context: context)
        return try await response
    }

    /// The router ignores empty segments (`/v1//me/events/` is the stream too), and so does this,
    /// for the rare path that has one.
    static func matches(_ path: String, _ paths: Set<String>) -> Bool {
        if paths.contains(path) { return true }
        guard path.contains("//") || path.hasSuffix("/") else { return false }
        return paths.contains("/" + path.split(separator: "/").joined(separator: "/"))
    }
}
