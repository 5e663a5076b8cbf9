import Foundation
import Logging
import PostgresNIO
import Testing
@testable import BookwormApp
@testable import BookwormCore
@testable import BookwormTestSupport

/// The workers' pools (`backgroundPools`): in `serve`, on an event loop apart from requests'.
@Suite struct WorkerPoolsTests {
    static let logger = Logger(label: "worker-pools-test")

    /// The in-process workers' connections live on `BackgroundLoop`, so their replies (an import's
    /// 9 MiB file, a chunk's rows) are never read on a loop that serves requests.
    @Test func theWorkersPoolsReadTheirRepliesOffTheRequestsLoops() async throws {
        try await withTestDatabase { settings, _ in
            let pools = backgroundPools(settings, config: Config.forTests(settings), logger: Self.logger)
            for (pool, name) in [(pools.jobs.client, "bookworm jobs"), (pools.mail.client, "bookworm mail")] {
                let (loop, named) = try await pool.whileRunning { client in
                    try await client.withConnection { connection in
                        var named = ""
                        for try await value in try await connection.query("SHOW application_name", logger: Self.logger).decode(String.self) {
                            named = value
                        }
                        return (connection.eventLoop, named)
                    }
                }
                #expect(loop === BackgroundLoop.group.next())
                #expect(!LoopExecutor.loops.contains { $0 === loop })
                #expect(named == name)
            }
        }
    }

    /// `serve`'s workers read through those pools: the job runner's and the outbox worker's
    /// `LISTEN` connections are theirs, named in `pg_stat_activity`.
    @Test func servesWorkersListenOnTheirOwnPools() async throws {
        try await withApp(configure: { $0.runWorker = true }) { app in
            var seen: [String: String] = [:]
            let both = try await eventually(within: 60) {
                let rows = try await app.db.query("""
                    SELECT query, application_name FROM pg_stat_activity
                    WHERE datname = current_database() AND query IN ('LISTEN "jobs";', 'LISTEN "outbox";')
                    """)
                for try await (query, name) in rows.decode((String, String).self) { seen[query] = name }
                return seen.count == 2
            }
            #expect(both, "listening: \(seen)")
            #expect(seen == ["LISTEN \"jobs\";": "bookworm jobs", "LISTEN \"outbox\";": "bookworm mail"])
        }
    }
}
