
import BookwormCore
import Foundation
import Logging
import Mail
import NIOPosix
import PostgresNIO

/// `BookwormBench outbox`: (a) claim-and-complete throughput of 2 workers over 50,000 queued
/// messages with a transport that does nothing; (b) SMTP delivery to a local aiosmtpd sink
/// beside what the same sink accepts from Python's smtplib on one connection, sending the very
/// same messages, in the same run; and the SMTP transport alone (no database) as the floor.
struct OutboxBenchmark {
    let messages: Int
    let smtpMessages: Int
    let workers: Int
    let port: Int

    private struct Figures {
        var discard = 0.0, floor = 0.0, smtpMany = 0.0
        /// One worker and smtplib, round by round (`rounds`).
        var oneWorker: [Double] = [], smtplib: [Double] = []
        var smtpOne: Double { median(oneWorker) }
        var python: Double { median(smtplib) }

        private func median(_ values: [Double]) -> Double {
            let sorted = values.sorted()
            return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
        }
    }

    /// One worker and smtplib take turns this many times, and each is reported at its median:
    /// measured once each, minutes apart, the ratio moved with whatever else the two cores did
    /// meanwhile (0.87 to 0.98 × between runs of the same code).
    static let rounds = 3

    func run() async throws {
        let server = try ServerUnderTest.start(port: port, arguments: ["serve", "--no-worker"])
        defer { server.stop() }
        let logger = Logger.benchQuiet
        let settings = server.clientSettings
        let sink = try BenchSink.start()
        defer { sink.stop() }
        let smtp = SMTPTransport(settings: try SMTPSettings(url: "smtp://127.0.0.1:\(sink.port)?tls=none", timeoutSeconds: 30))
        // Configured as `serve` and `worker` configure the worker's own pool (asynchronous commit).
        let pool = PostgresClient(configuration: settings.clientConfiguration(poolSize: 8, asynchronousCommit: true), backgroundLogger: logger)
        let figures = try await pool.whileRunning { client in
            var figures = Figures()
            try await OutboxBenchmarkSupport.clear(client: client, logger: logger)
            print("queueing \(messages) messages…")
            try await OutboxBenchmarkSupport.enqueue(count: messages, recipient: "reader@example.org", client: client, logger: logger)
            figures.discard = try await drain(client: client, transport: DiscardingTransport(), workers: workers, logger: logger)

            try await OutboxBenchmarkSupport.clear(client: client, logger: logger)
            try await OutboxBenchmarkSupport.enqueue(count: smtpMessages, recipient: "reader@example.org", client: client, logger: logger)
            let queued = try await OutboxBenchmarkSupport.queued(client: client, logger: logger)
            try sink.saveForSmtplib(queued)
            print("sending the same \(smtpMessages) messages through the SMTP transport alone…")
            figures.floor = try await Self.transportAlone(queued, smtp)
            try await alternate(&figures, client: client, smtp: smtp, sink: sink, logger: logger)
            print("delivering \(smtpMessages) messages to aiosmtpd, \(workers) workers…")
            figures.smtpMany = try await drain(client: client, transport: smtp, workers: workers, logger: logger)
            try await OutboxBenchmarkSupport.clear(client: client, logger: logger)
            return figures
        }
        report(figures)
    }

    /// One worker's drain of the queued messages, then smtplib sending the same, `rounds` times.
    private func alternate(_ figures: inout Figures, client: PostgresClient, smtp: SMTPTransport, sink: BenchSink,
                           logger: Logger) async throws {
        for round in 1...Self.rounds {
            print("round \(round) of \(Self.rounds): delivering \(smtpMessages) messages to aiosmtpd, 1 worker…")
            figures.oneWorker.append(try await drain(client: client, transport: smtp, workers: 1, logger: logger))
            print("round \(round) of \(Self.rounds): the same messages with Python smtplib on one connection…")
            figures.smtplib.append(try sink.smtplibRate())
            try await OutboxBenchmarkSupport.clear(client: client, logger: logger)
            try await OutboxBenchmarkSupport.enqueue(count: smtpMessages, recipient: "reader@example.org", client: client, logger: logger)
        }
    }

    /// Messages per second through one session with no database at all: what is left for the
    /// worker's claims and records to cost.
    private static func transportAlone(_ queued: [OutgoingMessage], _ smtp: SMTPTransport) async throws -> Double {
        try await NIOThreadPool.singleton.runIfActive {
            let session = try smtp.openSession()
            defer { session.close() }
            let start = ContinuousClock.now
            for message in queued {
                guard session.send(message) == .sent else { throw Shell.Failure(description: "the sink refused a message") }
            }
            return Double(queued.count) / (ContinuousClock.now - start).seconds
        }
    }

    /// Messages per second for `workers` workers to empty the queue.
    private func drain(client: PostgresClient, transport: any MailTransport, workers: Int, logger: Logger) async throws -> Double {
        let total = try await OutboxBenchmarkSupport.pending(client: client, logger: logger)
        var policy = OutboxPolicy()
        policy.batchSize = 100
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<workers {
                let worker = OutboxWorker(client: .forAdministration(client), transport: transport, policy: policy, logger: logger, clock: SystemClock())
                group.addTask { try await worker.drain() }
            }
            try await group.waitForAll()
        }
        let seconds = (ContinuousClock.now - start).seconds
        let sent = try await OutboxBenchmarkSupport.sentCount(client: client, logger: logger)
        guard sent == total else { throw Shell.Failure(description: "only \(sent) of \(total) messages were sent") }
        return Double(total) / seconds
    }

    private func report(_ figures: Figures) {
        let one = figures.smtpOne / max(figures.python, 0.001)
        let many = figures.smtpMany / max(figures.python, 0.001)
        let smtplib = String(format: "smtplib %.0f msg/s", figures.python)
        print("")
        print(Table(rows: [
            ["measure", "value", "reference", "goal", "met"],
            ["(a) claim + complete, \(workers) workers, no-op transport, \(messages) msgs", String(format: "%.0f msg/s", figures.discard), "-",
             ">= 3000 msg/s", figures.discard >= 3000 ? "yes" : "NO"],
            ["(b) SMTP to aiosmtpd, 1 worker, \(smtpMessages) msgs, median of \(Self.rounds)", String(format: "%.0f msg/s", figures.smtpOne),
             smtplib + ", 1 connection, median", String(format: ">= 0.9 x: %.2f x", one), one >= 0.9 ? "yes" : "NO"],
            ["    SMTP to aiosmtpd, \(workers) workers", String(format: "%.0f msg/s", figures.smtpMany), smtplib,
             String(format: "%.2f x", many), "-"],
            ["    the SMTP transport alone, no database", String(format: "%.0f msg/s", figures.floor), smtplib,
             String(format: "%.2f x", figures.floor / max(figures.python, 0.001)), "-"],
        ]).render())
        let rounds = { (rates: [Double]) in rates.map { String(format: "%.0f", $0) }.joined(separator: ", ") }
        print("rounds, in turn (msg/s): 1 worker \(rounds(figures.oneWorker)); smtplib \(rounds(figures.smtplib))")
        BenchResults.save("outbox", [
            ResultRow("claim + complete, \(workers) workers, no-op transport", figures.discard, "msg/s", goal: ">= 3000 msg/s",
                      met: figures.discard >= 3000),
            ResultRow("SMTP delivery, 1 worker", figures.smtpOne, "msg/s", reference: smtplib, ratio: one, goal: ">= 0.9 x", met: one >= 0.9),
            ResultRow("SMTP delivery, \(workers) workers", figures.smtpMany, "msg/s", reference: smtplib, ratio: many),
            ResultRow("SMTP transport alone, no database", figures.floor, "msg/s", reference: smtplib,
                      ratio: figures.floor / max(figures.python, 0.001)),
        ])
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// An aiosmtpd server that accepts and counts (Debian's python3-aiosmtpd), and the smtplib
/// sender it is compared with.
final class BenchSink: Sendable {
    let pid: pid_t
    let port: Int
    let folder: String

    private init(pid: pid_t, port: Int, folder: String) {
        self.pid = pid
        self.port = port
        self.folder = folder
    }

    static let python = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "python3"

    static let sinkScript = """
        import socket, sys, time
        from aiosmtpd.controller import Controller
        class Count:
            async def handle_DATA(self, server, session, envelope):
                return "250 OK"
        probe = socket.socket(); probe.bind(("127.0.0.1", 0)); port = probe.getsockname()[1]; probe.close()
        Controller(Count(), hostname="127.0.0.1", port=port).start()
        open(sys.argv[1] + "/port.tmp", "w").write(str(port))
        import os; os.rename(sys.argv[1] + "/port.tmp", sys.argv[1] + "/port")
        while True: time.sleep(3600)
        """

    /// Sends each saved message with its own envelope; reading them is not timed.
    static let senderScript = """
        import json, smtplib, sys, time
        port = int(sys.argv[1])
        messages = [json.loads(line) for line in open(sys.argv[2], encoding="utf-8")]
        with smtplib.SMTP("127.0.0.1", port) as smtp:
            start = time.perf_counter()
            for m in messages:
                smtp.sendmail(m["from"], [m["to"]], m["content"].encode("utf-8"))
            print(len(messages) / (time.perf_counter() - start))
        """

    static func start() throws -> BenchSink {
        let folder = BenchScratch.url("bookworm-bench-sink-\(getpid())").path
        try? FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try sinkScript.write(toFile: folder + "/sink.py", atomically: true, encoding: .utf8)
        let pid = try ChildProcess.spawn(python, [folder + "/sink.py", folder], outputPath: folder + "/sink.log")
        for _ in 0..<200 {
            if let text = try? String(contentsOfFile: folder + "/port", encoding: .utf8), let port = Int(text) {
                return BenchSink(pid: pid, port: port, folder: folder)
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        kill(pid, SIGKILL)
        throw Shell.Failure(description: "aiosmtpd did not start: run `make deps` (python3-aiosmtpd)")
    }

    /// The messages the worker sends, one JSON object per line, for smtplib to send the same.
    func saveForSmtplib(_ messages: [OutgoingMessage]) throws {
        let lines = try messages.map { message in
            let object = ["from": message.envelopeFrom, "to": message.recipient, "content": message.content]
            return String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: folder + "/messages.jsonl", atomically: true, encoding: .utf8)
    }

    /// The saved messages through smtplib on one connection.
    func smtplibRate() throws -> Double {
        try Self.senderScript.write(toFile: folder + "/send.py", atomically: true, encoding: .utf8)
        let output = try Shell.run(Self.python, [folder + "/send.py", "\(port)", folder + "/messages.jsonl"])
        guard let rate = Double(output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw Shell.Failure(description: "smtplib sender: \(output)")
        }
        return rate
    }

    func stop() {
        kill(pid, SIGKILL)
        ChildProcess.wait(pid)
        try? FileManager.default.removeItem(atPath: folder)
    }
}
