import Foundation
import Logging
import PostgresNIO
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import BookwormCore
@testable import Mail
@testable import BookwormTestSupport

/// Several real processes on one PostgreSQL: two `serve --no-worker` and two `worker`.
@Suite struct ClusterTests {
    static func workerEnvironment(_ settings: DatabaseSettings, smtp: String) -> [String: String] {
        bookwormEnvironment(["DATABASE_URL": settings.connectionURL, "SMTP_URL": smtp, "BOOKWORM_MAIL_POLL_SECONDS": "1"])
    }

    @Test func twoAPIsAndTwoWorkersShareThrottlesAndDeliverEveryMailOnce() async throws {
        try await withSink { sink in
            try await withTestDatabase { settings, client in
                let environment = ["BOOKWORM_LOGIN_MAX_FAILURES": "3", "BOOKWORM_REGISTER_MAX_PER_HOUR": "1000"]
                let api = [try await ServerProcess(databaseURL: settings.connectionURL, environment: environment),
                           try await ServerProcess(databaseURL: settings.connectionURL, environment: environment)]
                defer { api.forEach { $0.stop() } }

                // The throttle lives in the database: three failures on either instance lock the account on both.
                let register = #"{"email":"shared@example.org","username":"shared_user","password":"correct horse battery"}"#
                let registered = try rawRequest(port: api[0].port, "POST", "/v1/auth/register", json: register)
                #expect(registered.status == 201, "\(registered.body)\n\(api[0].log.suffix(3000))")
                let wrong = #"{"login":"shared_user","password":"not the password at all"}"#
                for attempt in 0..<3 {
                    #expect(try rawRequest(port: api[attempt % 2].port, "POST", "/v1/auth/login", json: wrong).status == 401)
                }
                #expect(try rawRequest(port: api[1].port, "POST", "/v1/auth/login", json: wrong).status == 429)
                let right = #"{"login":"shared_user","password":"correct horse battery"}"#
                #expect(try rawRequest(port: api[0].port, "POST", "/v1/auth/login", json: right).status == 429)

                // Requests through both instances at once.
                let ports = api.map(\.port)
                let rate = try await offThePool { try Self.requestsPerSecond(ports: ports, clients: 8, each: 60) }
                print("cluster: \(Int(rate)) requests/s through 2 API processes (8 clients, GET /v1/copies)")

                // 300 queued messages (and the registration's), two worker processes: each delivered once.
                let db = Database.forTests(client)
                let ids = try await Self.enqueue(300, db: db)
                let started = ContinuousClock.now
                let workers = try (0..<2).map { _ in
                    try ChildProcess.spawn(try bookwormBinary(), ["worker"], environment: Self.workerEnvironment(settings, smtp: sink.url))
                }
                let allSent = try await eventually(within: 120, interval: .milliseconds(100)) {
                    try await Self.queued(db) == 0
                }
                let seconds = (ContinuousClock.now - started).inSeconds
                for pid in workers { kill(pid, allSent ? SIGTERM : SIGKILL); _ = ChildProcess.wait(pid) }
                #expect(allSent)
                print("cluster: \(ids.count + 1) mails in \(String(format: "%.2f", seconds)) s by 2 worker processes "
                      + "(\(Int(Double(ids.count + 1) / max(seconds, 0.001))) mails/s)")
                let received = sink.messages().compactMap { $0.header("Message-ID") }
                #expect(Set(ids).isSubset(of: Set(received)))
                #expect(received.count == ids.count + 1, "duplicates: \(received.count - ids.count - 1)")
            }
        }
    }

    @Test func migrateUpRunByTwoProcessesAtOnceAppliesEachFileOnce() async throws {
        try await withTestDatabase(empty: true) { settings, client in
            let environment = ["DATABASE_URL": settings.connectionURL, "LOG_LEVEL": "error",
                               "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]
            let logs = (0..<2).map { FileManager.default.temporaryDirectory.appendingPathComponent("migrate-\($0)-\(UUID().uuidString).log").path }
            let pids = try logs.map { try ChildProcess.spawn(try bookwormBinary(), ["migrate", "up"], environment: environment, outputPath: $0) }
            let statuses = try await offThePool { pids.map { ChildProcess.wait($0) } }
            let output = logs.compactMap { try? String(contentsOfFile: $0, encoding: .utf8) }.joined(separator: "\n")
            #expect(statuses == [0, 0], "\(output)")
            let files = try Migrator.bundled().migrations.count
            let rows = try await client.query("SELECT count(*)::int8, count(DISTINCT version)::int8 FROM schema_migrations").decode((Int64, Int64).self)
            for try await (count, distinct) in rows {
                #expect(count == Int64(files) && distinct == Int64(files))
            }
        }
    }

    enum Outcome: Sendable {
        case answered(port: Int, status: Int)
        case refused
        case dropped(id: String)
    }

    /// Clients keep sending to both instances (a new connection each time, as through a balancer
    /// that retries refused connections elsewhere) while one instance gets SIGTERM. A request the
    /// stopping server took in (it logged its request id) must be answered; only connections
    /// it never took may fail.
    @Test func aRollingStopOfOneAPIDropsNoRequestItAccepted() async throws {
        try await withTestDatabase { settings, _ in
            let environment = ["LOG_LEVEL": "info", "BOOKWORM_LOG_FORMAT": "json"]
            let stopping = try await ServerProcess(databaseURL: settings.connectionURL, environment: environment)
            let staying = try await ServerProcess(databaseURL: settings.connectionURL, environment: environment)
            defer { staying.stop() }
            let ports = [stopping.port, staying.port]
            let outcomes = NIOLockedOutcomes()
            // SIGTERM after the 200th request, in the middle of the traffic; 1,000 in all.
            try await offThePool {
                DispatchQueue.concurrentPerform(iterations: 6) { client in
                    var index = client
                    var sent = 0
                    repeat {
                        index += 1
                        sent = outcomes.append(Self.send(port: ports[index % 2]))
                        if sent == 200 { kill(stopping.pid, SIGTERM) }
                    } while sent < 1000
                }
                stopping.stop()
            }
            let logged = Set(stopping.log.split(separator: "\n").compactMap { line -> String? in
                guard let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any],
                      object["message"] as? String == "request" else { return nil }
                return object["request_id"] as? String
            })
            let all = outcomes.all
            let answeredByStopping = all.filter { if case .answered(stopping.port, 200) = $0 { true } else { false } }.count
            let answeredByStaying = all.filter { if case .answered(staying.port, 200) = $0 { true } else { false } }.count
            let dropped = all.compactMap { if case .dropped(let id) = $0 { id } else { nil } }
            print("rolling stop: \(answeredByStopping) answered by the stopping instance, \(answeredByStaying) by the other, "
                  + "\(all.filter { if case .refused = $0 { true } else { false } }.count) refused, \(dropped.count) cut before a response")
            #expect(answeredByStopping > 0 && answeredByStaying > 0)
            let otherStatuses = all.compactMap { if case .answered(let port, let status) = $0, status != 200 { "\(port == stopping.port ? "stopping" : "staying"):\(status)" } else { nil } }
            #expect(otherStatuses.isEmpty, "\(otherStatuses)")
            #expect(dropped.filter(logged.contains).isEmpty, "accepted, then dropped: \(dropped.filter(logged.contains))")
        }
    }

    static func send(port: Int) -> Outcome {
        let id = UUID().uuidString.lowercased()
        guard let socket = try? RawSocket(port: port) else { return .refused }
        let request = "GET /v1/copies?limit=5 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Request-Id: \(id)\r\n\r\n"
        guard (try? socket.send(request)) != nil, let response = socket.readResponse(timeout: 30) else { return .dropped(id: id) }
        return .answered(port: port, status: response.status)
    }

    /// `clients` threads, each sending `each` requests alternately to the ports, one connection each.
    static func requestsPerSecond(ports: [Int], clients: Int, each: Int) throws -> Double {
        let failed = Mutex(0)
        let started = ContinuousClock.now
        DispatchQueue.concurrentPerform(iterations: clients) { client in
            for index in 0..<each {
                let port = ports[(client + index) % ports.count]
                if (try? rawRequest(port: port, "GET", "/v1/copies?limit=20"))?.status != 200 {
                    failed.withLock { $0 += 1 }
                }
            }
        }
        let seconds = (ContinuousClock.now - started).inSeconds
        let failures = failed.withLock { $0 }
        guard failures == 0 else { throw TestFailure("\(failures) requests failed") }
        return Double(clients * each) / max(seconds, 0.001)
    }

    static func enqueue(_ count: Int, db: Database) async throws -> [String] {
        let outbox = OutboxStore(client: db, logger: Logger(label: "test"), clock: SystemClock())
        let templates = MailTemplates(from: "Bookworm <no-reply@example.org>", publicBaseURL: "http://x", clock: SystemClock())
        let messages = (0..<count).map { index in
            MailMessage(messageID: MailMessage.newMessageID(from: templates.from), from: templates.from, to: "reader\(index)@example.org",
                        replyTo: nil, subject: "Hello \(index)", body: "Body", date: Date())
        }
        try await db.transaction(logger: Logger(label: "test")) { connection in
            _ = try await outbox.enqueue(messages, kind: .contact, on: connection)
        }
        return messages.map(\.messageID)
    }

    static func queued(_ db: Database) async throws -> Int {
        let rows = try await db.query("SELECT count(*)::int8 FROM outbox_messages WHERE status = 'queued'", logger: Logger(label: "test"))
        for try await count in rows.decode(Int64.self) { return Int(count) }
        return 0
    }
}

extension Duration {
    var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

final class NIOLockedOutcomes: Sendable {
    private let box = Mutex<[ClusterTests.Outcome]>([])
    /// Appends and returns how many there are now.
    func append(_ outcome: ClusterTests.Outcome) -> Int { box.withLock { $0.append(outcome); return $0.count } }
    var all: [ClusterTests.Outcome] { box.withLock { $0 } }
}
