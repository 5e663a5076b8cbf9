import Hummingbird
import HummingbirdTesting
import Synchronization
import Testing
@testable import BookwormCore

/// `ChildTaskResponder` makes each response in a task of its own, below the connection's (whose
/// slabs an open connection would otherwise keep).
@Suite struct ChildTaskResponderTests {
    @Test func aResponseIsMadeInAChildOfTheTaskThatServesItsConnection() async throws {
        let tasks = Tasks()
        let app = Application(responder: Recording(tasks: tasks, inner: ChildTaskResponder(Answer(tasks: tasks))))
        try await app.test(.router) { client in
            try await client.execute(uri: "/", method: .get) { #expect($0.status == .ok) }
        }
        let (outer, inner) = try #require(tasks.pair)
        #expect(outer != inner)

        // Without it, both are the same task: the comparison above can fail.
        let plain = Tasks()
        try await Application(responder: Recording(tasks: plain, inner: Answer(tasks: plain))).test(.router) { client in
            try await client.execute(uri: "/", method: .get) { #expect($0.status == .ok) }
        }
        let (same, alsoSame) = try #require(plain.pair)
        #expect(same == alsoSame)
    }

    /// The tasks the outer and the inner responder ran in, both alive when the inner one looked.
    final class Tasks: Sendable {
        private let seen = Mutex<[Int]>([])
        func record() {
            let task = withUnsafeCurrentTask { $0?.hashValue } ?? 0
            seen.withLock { $0.append(task) }
        }
        var pair: (Int, Int)? { seen.withLock { $0.count == 2 ? ($0[0], $0[1]) : nil } }
    }

    struct Recording<Inner: HTTPResponder>: HTTPResponder {
        let tasks: Tasks
        let inner: Inner
        func respond(to request: Request, context: Inner.Context) async throws -> Response {
            tasks.record()
            return try await inner.respond(to: request, context: context)
        }
    }

    struct Answer: HTTPResponder {
        let tasks: Tasks
        func respond(to request: Request, context: BasicRequestContext) async throws -> Response {
            tasks.record()
            return Response(status: .ok)
        }
    }
}
