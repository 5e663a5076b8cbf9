import Hummingbird
import HummingbirdTesting
import Synchronization
import Testing
@testable import BookwormCore

/// `ChildTaskResponder` makes each response in a structured child of the task that would make it
/// (the connection's, whose slabs an open connection would otherwise keep).
@Suite struct ChildTaskResponderTests {
    @Test func aResponseIsMadeInAChildOfTheTaskThatServesTheRequest() async throws {
        let child = try await Self.record(ChildTaskResponder.init)
        #expect(child.outer != child.inner)
        // A structured child: the request's task being cancelled reaches it (a `Task {}` would not).
        #expect(child.innerCancelled)

        // Without it, both are the same task: the comparison above can fail.
        let plain = try await Self.record { $0 }
        #expect(plain.outer == plain.inner)
    }

    /// One request through `Recording(wrap(Answer))`, in a task of its own that `Recording`
    /// cancels before it goes on (so the test's own task stays whole).
    static func record<Wrapped: HTTPResponder>(_ wrap: @escaping @Sendable (Answer) -> Wrapped) async throws -> Seen
    where Wrapped.Context == BasicRequestContext {
        let tasks = Tasks()
        let app = Application(responder: Recording(tasks: tasks, inner: wrap(Answer(tasks: tasks))))
        try await Task {
            try await app.test(.router) { client in
                try await client.execute(uri: "/", method: .get) { #expect($0.status == .ok) }
            }
        }.value
        return try #require(tasks.seen)
    }

    struct Seen {
        let outer: Int
        let inner: Int
        let innerCancelled: Bool
    }

    /// The tasks the outer and the inner responder ran in, both alive when the inner one looked.
    final class Tasks: Sendable {
        private let state = Mutex<(tasks: [Int], cancelled: Bool)>(([], false))
        func record(cancelled: Bool = false) {
            let task = withUnsafeCurrentTask { $0?.hashValue } ?? 0
            state.withLock { $0.tasks.append(task); $0.cancelled = cancelled }
        }
        var seen: Seen? {
            state.withLock { $0.tasks.count == 2 ? Seen(outer: $0.tasks[0], inner: $0.tasks[1], innerCancelled: $0.cancelled) : nil }
        }
    }

    struct Recording<Inner: HTTPResponder>: HTTPResponder {
        let tasks: Tasks
        let inner: Inner
        func respond(to request: Request, context: Inner.Context) async throws -> Response {
            tasks.record()
            withUnsafeCurrentTask { $0?.cancel() }
            return try await inner.respond(to: request, context: context)
        }
    }

    struct Answer: HTTPResponder {
        let tasks: Tasks
        func respond(to request: Request, context: BasicRequestContext) async throws -> Response {
            tasks.record(cancelled: Task.isCancelled)
            return Response(status: .ok)
        }
    }
}
