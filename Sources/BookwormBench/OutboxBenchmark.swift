
import BookwormCore
import Foundation
import Logging
import Mail
import PostgresNIO

/// `BookwormBench outbox`: (a) claim-and-complete throughput of 2 workers over 50,000 queued
/// messages with a transport that does nothing; (b) SMTP delivery to a local aiosmtpd sink
/// beside what the same sink accepts from Python's smtplib on one connection, in the same run.
struct OutboxBenchmark {
    let messages: Int
    let smtpMessages: Int
    let workers: Int
    let port: Int

    func run() async throws {
        let server = try ServerUnderTest.start(port: port, arguments: ["serve", "--no-worker"])
        defer { server.stop() }
        let logger = {
            var logger = Logger(label: "bench")
            logger.logLevel = .error
            return logger
        }()
        let settings = server.clientSettings
        let sink = try BenchSink.start()
        defer { sink.stop() }
        let sinkPort = sink.port
        // Configured as `serve` and `worker` configure the worker's own pool (asynchronous commit).
        let pool = PostgresClient(configuration: settings.clientConfiguration(poolSize: 8, asynchronousCommit: true), backgroundLogger: logger)
        let results = try await pool.whileRunning { client in
            try await OutboxBenchmarkSupport.clear(client: client, logger: logger)
            print("queueing \(messages) messages…")
            try await OutboxBenchmarkSupport.enqueue(count: messages, recipient: "reader@example.org", client: client, logger: logger)
            let discard = try await drain(client: client, transport: DiscardingTransport(), workers: workers, logger: logger)

            try await OutboxBenchmarkSupport.clear(client: client, logger: logger)
            try await OutboxBenchmarkSupport.enqueue(count: smtpMessages, recipient: "reader@example.org", client: client, logger: logger)
            let smtp = SMTPTransport(settings: try SMTPSettings(url: "smtp://127.0.0.1:\(sinkPort)?tls=none", timeoutSeconds: 30))
            print("delivering \(smtpMessages) messages to aiosmtpd, 1 worker…")
            let oneWorker = try await drain(client: client, transport: smtp, workers: 1, logger: logger)
            try await OutboxBenchmarkSupport.clear(client: client, logger: logger)
            try await OutboxBenchmarkSupport.enqueue(count: smtpMessages, recipient: "reader@example.org", client: client, logger: logger)
            print("delivering \(smtpMessages) messages to aiosmtpd, \(workers) workers…")
            let manyWorkers = try await drain(client: client, transport: smtp, workers: workers, logger: logger)
            try await OutboxBenchmarkSupport.clear(client: client, logger: logger)
            return (discard, oneWorker, manyWorkers)
        }
        print("sending \(smtpMessages) messages with Python smtplib on one connection…")
        let python = try sink.smtplibRate(messages: smtpMessages)
        report(discard: results.0, smtpOne: results.1, smtpMany: results.2, python: python)
    }

    /// Messages per second for `workers` workers to empty the queue.
    private func drain(client: PostgresClient, transport: any MailTransport, workers: Int, logger: Logger) async throws -> Double {
        let total = try await OutboxBenchmarkSupport.pending(client: client, logger: logger)
        var policy = OutboxPolicy()
        policy.batchSize = 100
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<workers {
                let worker = OutboxWorker(client: .forAdministration(client), transport: transport, policy: policy, logger: logger)
                group.addTask { while try await worker.drainOnce() > 0 {} }
            }
            try await group.waitForAll()
        }
        let seconds = (ContinuousClock.now - start).seconds
        let sent = try await OutboxBenchmarkSupport.sentCount(client: client, logger: logger)
        guard sent == total else { throw Shell.Failure(description: "only \(sent) of \(total) messages were sent") }
        return Double(total) / seconds
    }

    private func report(discard: Double, smtpOne: Double, smtpMany: Double, python: Double) {
        let one = smtpOne / max(python, 0.001)
        let many = smtpMany / max(python, 0.001)
        print("")
        print(Table(rows: [
            ["measure", "value", "reference", "target", "met"],
            ["(a) claim + complete, \(workers) workers, no-op transport, \(messages) msgs", String(format: "%.0f msg/s", discard), "-",
             ">= 3000 msg/s", discard >= 3000 ? "yes" : "NO"],
            ["(b) SMTP to aiosmtpd, 1 worker, \(smtpMessages) msgs", String(format: "%.0f msg/s", smtpOne),
             String(format: "%.0f msg/s smtplib, 1 connection", python), String(format: ">= 70%%: %.0f%%", one * 100), one >= 0.7 ? "yes" : "NO"],
            ["    SMTP to aiosmtpd, \(workers) workers", String(format: "%.0f msg/s", smtpMany),
             String(format: "%.0f msg/s smtplib", python), String(format: "%.0f%%", many * 100), "-"],
        ]).render())
        BenchResults.save("outbox", [
            ResultRow("claim + complete, \(workers) workers, no-op transport", discard, "msg/s", goal: ">= 3000 msg/s", met: discard >= 3000),
            ResultRow("SMTP delivery, 1 worker", smtpOne, "msg/s", reference: String(format: "smtplib %.0f msg/s", python), ratio: one,
                      goal: ">= 0.9 x", met: one >= 0.9),
            ResultRow("SMTP delivery, \(workers) workers", smtpMany, "msg/s", reference: String(format: "smtplib %.0f msg/s", python),
                      ratio: many),
        ])
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// An aiosmtpd server that accepts and counts (Debian's python3-aiosmtpd), and the smtplib
/// sender it is compared with.
final class BenchSink {
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

    static let senderScript = """
        import smtplib, sys, time
        port, count = int(sys.argv[1]), int(sys.argv[2])
        body = open(sys.argv[3], "rb").read()
        with smtplib.SMTP("127.0.0.1", port) as smtp:
            start = time.perf_counter()
            for _ in range(count):
                smtp.sendmail("bench@bookworm.localhost", ["reader@example.org"], body)
            print(count / (time.perf_counter() - start))
        """

    static func start() throws -> BenchSink {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("bookworm-bench-sink-\(getpid())").path
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

    /// The same kind of message the service sends, through smtplib on one connection.
    func smtplibRate(messages: Int) throws -> Double {
        try Self.senderScript.write(toFile: folder + "/send.py", atomically: true, encoding: .utf8)
        let body = "Message-ID: <x@bookworm.localhost>\r\nFrom: bench@bookworm.localhost\r\nTo: reader@example.org\r\n"
            + "Subject: Benchmark\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n"
            + "Content-Transfer-Encoding: quoted-printable\r\n\r\n"
            + String(repeating: "Message: is the copy still available?\r\n", count: 8)
        try body.write(toFile: folder + "/message.eml", atomically: true, encoding: .utf8)
        let output = try Shell.run(Self.python, [folder + "/send.py", "\(port)", "\(messages)", folder + "/message.eml"])
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
