import Foundation
import Logging
import Synchronization
import Testing
@testable import BookwormCore
@testable import BookwormApp
@testable import BookwormTestSupport

/// PostgreSQL stopped under a real server process (its own cluster, so other tests are not
/// disturbed) and started again.
@Suite struct OutageTests {
    @Test func aDatabaseOutageAnswers503FastAndTheSameProcessRecovers() async throws {
        let folder = TestDatabaseServer.dataDirectory + "/outage-" + String(UUID().uuidString.prefix(8))
        let cluster = EmbeddedPostgres(dataDirectory: folder, logger: Logger(label: "outage"), fastAndLoose: true)
        let settings = try await cluster.start(database: "bookworm")
        defer {
            cluster.stop()
            try? FileManager.default.removeItem(atPath: folder)
        }
        let server = try await ServerProcess(databaseURL: settings.connectionURL, environment: [
            "BOOKWORM_DB_ACQUIRE_TIMEOUT_MS": "1000", "BOOKWORM_DB_STATEMENT_TIMEOUT_MS": "2000",
        ])
        defer { server.stop() }
        let port = server.port
        let token = try register(port: port)

        // Writers keep adding copies from before the outage until after it.
        let outcomes = Outcomes()
        let running = Outcomes.Flag()
        // Writers are threads: their socket calls block, and must not take the test's own
        // task threads (two on this machine) while it stops and starts the database.
        let writers = DispatchGroup()
        for writer in 0..<4 {
            writers.enter()
            Thread.detachNewThread {
                defer { writers.leave() }
                var index = 0
                while running.isSet {
                    index += 1
                    let start = ContinuousClock.now
                    let response: RawResponse
                    do {
                        response = try rawRequest(port: port, "POST", "/v1/me/copies",
                                                  json: #"{"title":"Outage \#(writer)-\#(index)","authors":["A"],"condition":"good"}"#,
                                                  token: token, timeout: 30)
                    } catch let failure as TestFailure where failure.description.hasPrefix("connect()") {
                        continue  // our side ran out of something (a port); not an answer from the server
                    } catch {
                        outcomes.withLock { $0.append(Outcome(status: 0, seconds: 30, id: nil, retryAfter: nil)) }
                        continue
                    }
                    let elapsed = ContinuousClock.now - start
                    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                    let id = response.status == 201 ? response.json?["id"] as? String : nil
                    outcomes.withLock { $0.append(Outcome(status: response.status, seconds: seconds, id: id,
                                                          retryAfter: response.headers["retry-after"])) }
                }
            }
        }
        #expect(try await eventually { outcomes.withLock { $0.count } >= 8 })
        cluster.stop()
        let ready = try rawRequest(port: port, "GET", "/health/ready", timeout: 30)
        #expect(ready.status == 503)
        #expect(try await eventually { outcomes.withLock { $0.filter { $0.status == 503 }.count } >= 24 })
        _ = try await cluster.start(database: "bookworm")
        #expect(try await eventually {
            (try? rawRequest(port: port, "GET", "/health/ready", timeout: 10))?.status == 200
        })
        #expect(try await eventually { outcomes.withLock { $0.suffix(4).allSatisfy { $0.status == 201 } } })
        running.clear()
        await withCheckedContinuation { continuation in writers.notify(queue: .global()) { continuation.resume() } }

        let all = outcomes.withLock { $0 }
        let failed = all.filter { $0.status == 503 }
        #expect(all.allSatisfy { $0.status == 201 || $0.status == 503 }, "\(all.map(\.status))")
        #expect(failed.allSatisfy { $0.retryAfter != nil })
        // Seconds, not the outage's length: the acquire deadline (1 s) per database call, plus
        // whatever a machine running every other test at once adds (3.6 s seen in CI).
        let slowest = failed.map(\.seconds).max() ?? 0
        #expect(slowest < 8, "slowest 503 took \(slowest) s")
        print("outage: \(all.count) requests, \(failed.count) answered 503; fastest 503 \(failed.map(\.seconds).min() ?? 0) s, slowest \(slowest) s")

        // Every copy that got a 201 is there.
        let created = Set(all.compactMap(\.id))
        let listed = try rawRequest(port: port, "GET", "/v1/me/copies?limit=100", token: token)
        var found = Set((listed.json?["data"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String })
        var cursor = listed.json?["next_cursor"] as? String
        while let next = cursor {
            let page = try rawRequest(port: port, "GET", "/v1/me/copies?limit=100&cursor=\(next)", token: token)
            found.formUnion((page.json?["data"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String })
            cursor = page.json?["next_cursor"] as? String
        }
        #expect(created.isSubset(of: found))
    }

    private func register(port: Int) throws -> String {
        let response = try rawRequest(port: port, "POST", "/v1/auth/register",
                                      json: #"{"email":"outage@example.org","username":"outage","password":"correct horse battery"}"#)
        guard response.status == 201, let token = response.json?["token"] as? String else {
            throw TestFailure("register: \(response.status) \(response.body)")
        }
        return token
    }
}

struct Outcome: Sendable {
    var status: Int
    var seconds: Double
    var id: String?
    var retryAfter: String?
}

final class Outcomes: Sendable {
    private let list = Mutex<[Outcome]>([])
    func withLock<T: Sendable>(_ body: (inout [Outcome]) -> T) -> T { list.withLock { body(&$0) } }

    final class Flag: Sendable {
        private let value = Atomic<Bool>(true)
        var isSet: Bool { value.load(ordering: .relaxed) }
        func clear() { value.store(false, ordering: .relaxed) }
    }
}
