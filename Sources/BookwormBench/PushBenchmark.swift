import AsyncHTTPClient
import BookwormCore
import FakePush
import Foundation
import JWTKit
import Logging
import Mail
import NIOCore
import NIOSSL
import PostgresNIO

/// `BookwormBench push`: one push worker sending 10,000 queued pushes to the fake APNs (HTTP/2
/// over TLS, one connection), beside async-http-client alone sending the very same requests
/// from memory, 100 at a time on one connection as a skilled user would, and one after another
/// as a plain loop does. Rounds alternate; each side is reported at its median.
struct PushBenchmark {
    let pushes: Int
    let rounds: Int
    let port: Int

    func run() async throws {
        let server = try ServerUnderTest.start(port: port, arguments: ["serve", "--no-worker"])
        defer { server.stop() }
        let logger = Logger.benchQuiet
        let fake = try await FakePushProvider.start()
        defer { fake.stop() }
        let settings = try PushSettings.fromEnvironment(EnvironmentReader(env: fake.environment.merging(["BOOKWORM_PUSH_TIMEOUT_SECONDS": "30"]) { $1 }))
        let pool = PostgresClient(configuration: server.clientSettings.clientConfiguration(poolSize: 6),
                                  backgroundLogger: logger)
        let (worker, reference, sequential, signed) = try await pool.whileRunning { client in
            let db = Database.forAdministration(client)
            try await PushBenchmarkSQL.prepare(devices: pushes, client: db, logger: logger)
            var worker: [Double] = [], reference: [Double] = [], sequential: [Double] = []
            var signed = 0
            for round in 1...rounds {
                print("round \(round) of \(rounds): the push worker…")
                let (rate, tokens) = try await drain(settings: settings, db: db, fake: fake, logger: logger)
                worker.append(rate)
                signed = max(signed, tokens)
                print("round \(round) of \(rounds): async-http-client alone, 100 in flight…")
                reference.append(try await Self.plain(settings: settings, db: db, fake: fake, inFlight: 100, logger: logger))
            }
            print("async-http-client alone, one request after another…")
            sequential.append(try await Self.plain(settings: settings, db: db, fake: fake, inFlight: 1, logger: logger))
            return (median(worker), median(reference), median(sequential), signed)
        }
        report(worker: worker, reference: reference, sequential: sequential, signed: signed)
    }

    /// Pushes per second for one worker to empty a queue of `pushes`, and the provider tokens it signed.
    private func drain(settings: PushSettings, db: Database, fake: FakePushProvider, logger: Logger) async throws -> (Double, Int) {
        try await PushBenchmarkSQL.enqueue(settings: settings, client: db, logger: logger)
        let before = fake.received.count
        let transport = try PushTransport(settings: settings, clock: SystemClock(), logger: logger)
        let sender = PushSender(store: PushStore(client: db, logger: logger), transport: transport, settings: settings,
                                clock: SystemClock(), logger: logger)
        let runner = JobRunner(client: db, batch: sender, batchSize: settings.batchSize, lease: settings.lease, logger: logger,
                               clock: SystemClock())
        let start = ContinuousClock.now
        while try await runner.runDue() > 0 {}
        let seconds = (ContinuousClock.now - start).seconds
        let signed = await transport.tokensMade().apns
        try await transport.shutdown()
        guard fake.received.count - before == pushes else {
            throw Shell.Failure(description: "the worker sent \(fake.received.count - before) of \(pushes) pushes")
        }
        return (Double(pushes) / seconds, signed)
    }

    /// The same requests the worker sends (read from the same queue before the clock starts),
    /// through async-http-client alone, `inFlight` at a time on one HTTP/2 connection.
    static func plain(settings: PushSettings, db: Database, fake: FakePushProvider, inFlight: Int, logger: Logger) async throws -> Double {
        guard let apns = settings.apns else { throw Shell.Failure(description: "APNs is not configured") }
        try await PushBenchmarkSQL.enqueue(settings: settings, client: db, logger: logger)
        let requests = try await PushBenchmarkSQL.requests(apns: apns, client: db, logger: logger)
        try await PushBenchmarkSQL.clear(client: db, logger: logger)
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.additionalTrustRoots = [.file(fake.caFile)]
        let http = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: .init(tlsConfiguration: tls))
        let before = fake.received.count
        let start = ContinuousClock.now
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, request) in requests.enumerated() {
                    if index >= inFlight { try await group.next() }
                    group.addTask {
                        let response = try await http.execute(request, timeout: .seconds(30))
                        _ = try await response.body.collect(upTo: 65536)
                        guard response.status == .ok else { throw Shell.Failure(description: "the fake answered \(response.status)") }
                    }
                }
                try await group.waitForAll()
            }
        } catch {
            try await http.shutdown()
            throw error
        }
        let seconds = (ContinuousClock.now - start).seconds
        try await http.shutdown()
        guard fake.received.count - before == requests.count else { throw Shell.Failure(description: "the reference lost pushes") }
        return Double(requests.count) / seconds
    }

    private func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }

    private func report(worker: Double, reference: Double, sequential: Double, signed: Int) {
        let ratio = worker / max(reference, 0.001)
        let plain = String(format: "async-http-client, 100 in flight %.0f/s", reference)
        print("")
        print(Table(rows: [
            ["measure", "value", "reference", "goal", "met"],
            ["push worker, \(pushes) pushes to the fake APNs, median of \(rounds)", String(format: "%.0f pushes/s", worker), plain,
             String(format: ">= 0.8 x: %.2f x", ratio), ratio >= 0.8 ? "yes" : "NO"],
            ["    beside a plain loop, one request after another", String(format: "%.0f pushes/s", worker),
             String(format: "async-http-client, sequential %.0f/s", sequential), String(format: "%.2f x", worker / max(sequential, 0.001)), "-"],
            ["provider tokens signed by one worker (per 50 minutes)", "\(signed)", "-", "<= 1", signed <= 1 ? "yes" : "NO"],
        ]).render())
        BenchResults.save("push", [
            ResultRow("push worker, \(pushes) pushes over one HTTP/2 connection", worker, "pushes/s", reference: plain, ratio: ratio,
                      goal: ">= 0.8 x", met: ratio >= 0.8),
            ResultRow("provider tokens signed per worker", Double(signed), "tokens", goal: "<= 1 per 50 minutes", met: signed <= 1),
        ])
    }
}
