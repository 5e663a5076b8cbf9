import Foundation
import PostgresNIO
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import BookwormCore
@testable import BookwormTestSupport

/// A keyed write's key is claimed in the write's own transaction: a real server killed with
/// SIGKILL before its write commits leaves nothing (the retry runs for real), after it leaves
/// both the write and its answer (the retry gets that answer).
@Suite struct IdempotencyCrashTests {
    static let copy = #"{"title":"Kindred","authors":["Octavia E. Butler"],"condition":"good"}"#

    @Test func aServerKilledBeforeOrAfterItsWriteCommitsMakesOneCopyAndTheRightAnswer() async throws {
        try await withTestDatabase { settings, client in
            let db = Database.forTests(client)
            // Its INSERT waits on the test's lock until it is killed, not only for the production
            // 5 s statement deadline, which a loaded test run could let pass between two looks.
            let first = try await ServerProcess(databaseURL: settings.connectionURL, environment: ["BOOKWORM_DB_STATEMENT_TIMEOUT_MS": "120000"])
            let register = #"{"email":"crash@example.org","username":"crash_user","password":"correct horse battery"}"#
            let token = try #require(try rawRequest(port: first.port, "POST", "/v1/auth/register", json: register).json?["token"] as? String)
            let server = first

            // Killed while its INSERT waits for a lock the test holds: nothing commits.
            try await client.withConnection { locker in
                try await locker.query("BEGIN", logger: locker.logger)
                try await locker.query("LOCK TABLE copies IN SHARE ROW EXCLUSIVE MODE", logger: locker.logger)
                let socket = try RawSocket(port: server.port)
                try socket.send(rawRequestText("POST", "/v1/me/copies", json: Self.copy, token: token, headers: ["Idempotency-Key": "before"]))
                #expect(try await eventually(within: 30, interval: .milliseconds(20)) {
                    try await Self.count(db, "SELECT count(*)::int8 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO copies%'") == 1
                }, "\(server.log.suffix(2000))")
                Self.kill(server)
                try await locker.query("ROLLBACK", logger: locker.logger)
            }
            // The killed server's backend ends once it reads the closed socket; until then it holds the key's lock.
            // Other tests insert copies in their own databases of the same cluster, hence datname.
            #expect(try await eventually(within: 30, interval: .milliseconds(20)) {
                try await Self.count(db, "SELECT count(*)::int8 FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'INSERT INTO copies%' AND pid <> pg_backend_pid()") == 0
            })
            let second = try await ServerProcess(databaseURL: settings.connectionURL)
            #expect(try await Self.count(db, "SELECT count(*)::int8 FROM idempotency_keys") == 0)
            let rerun = try rawRequest(port: second.port, "POST", "/v1/me/copies", json: Self.copy, token: token, headers: ["Idempotency-Key": "before"])
            #expect(rerun.status == 201 && rerun.headers["idempotent-replayed"] == nil)
            #expect(try await Self.count(db, "SELECT count(*)::int8 FROM copies") == 1)

            // Killed once its write and answer have committed, whether or not the answer left.
            let socket = try RawSocket(port: second.port)
            try socket.send(rawRequestText("POST", "/v1/me/copies", json: Self.copy, token: token, headers: ["Idempotency-Key": "after"]))
            #expect(try await eventually(within: 30, interval: .milliseconds(5)) {
                try await Self.count(db, "SELECT count(*)::int8 FROM idempotency_keys WHERE key = 'after'") == 1
            })
            Self.kill(second)
            #expect(try await Self.count(db, "SELECT count(*)::int8 FROM copies") == 2)
            let third = try await ServerProcess(databaseURL: settings.connectionURL)
            defer { third.stop() }
            let retry = try rawRequest(port: third.port, "POST", "/v1/me/copies", json: Self.copy, token: token, headers: ["Idempotency-Key": "after"])
            #expect(retry.status == 201 && retry.headers["idempotent-replayed"] == "true")
            #expect(try await Self.count(db, "SELECT count(*)::int8 FROM copies") == 2)
            let id = try #require(retry.json?["id"] as? String)
            #expect(try await Self.count(db, "SELECT count(*)::int8 FROM copies WHERE id = '\(id)'") == 1)
        }
    }

    static func kill(_ server: ServerProcess) {
        Glibc.kill(server.pid, SIGKILL)
        _ = ChildProcess.wait(server.pid)
    }

    static func count(_ db: Database, _ sql: String) async throws -> Int64 {
        for try await count in try await db.query(PostgresQuery(unsafeSQL: sql)).decode(Int64.self) { return count }
        return -1
    }
}
