import Foundation

/// Ten users upload a Goodreads file of about 10 MiB each at the same moment, and the server's
/// own worker imports them all, while another user keeps asking for `GET /v1/me` (paced, as a
/// person browsing). Goals: that user's p99 at most twice what it was idle, and the server's
/// peak memory at most 128 MiB above its idle memory.
struct ImportStorm {
    var uploads = 0
    var bytes = 0
    var seconds = 0.0
    var finished = 0
    var idle = Percentiles([])
    var busy = Percentiles([])
    var busyCount = 0
    /// The busy probe's requests while the uploads arrive (about 250 at the default upload pace),
    /// and its p99 after, while the worker imports them.
    var uploading = Percentiles([])
    var uploadingCount = 0
    var importingP99 = Double.nan
    var idleMiB = 0.0
    var peakMiB = 0.0
    /// What waking up costs on the machine, measured after the storm, to set the p99 beside.
    var wakeDelay: WakeDelay?

    var p99Met: Bool { busy.p99 <= 2 * idle.p99 }
    var memoryMet: Bool { peakMiB - idleMiB <= 128 }

    /// The busy probe's latencies in order: all of them, those up to `uploadingCount`, the rest.
    mutating func split(_ latencies: [Double]) {
        busy = Percentiles(latencies)
        busyCount = latencies.count
        uploading = Percentiles(Array(latencies.prefix(uploadingCount)))
        importingP99 = Percentiles(Array(latencies.dropFirst(uploadingCount))).p99
    }
}

extension PortabilityBenchmark {
    func importStorm(tools: LoadTools, base: String, server: ServerUnderTest, uploads: Int = 10) async throws -> ImportStorm {
        let stamp = Int(Date().timeIntervalSince1970)
        let tokens = try (0..<uploads).map { try BenchAccount.token(curl: tools.curl, base: base, username: "bench_storm\($0)_\(stamp)") }
        let probeToken = try BenchAccount.token(curl: tools.curl, base: base, username: Self.reader)
        let file = Array(Self.stormFile().utf8)
        var storm = ImportStorm(uploads: uploads, bytes: file.count)
        // The wish alerts of the copies step (c) made run first, and autovacuum (an earlier run's
        // storm users were deleted) finishes: idle is a server and a database with nothing to do.
        try await waitUntilQuiet(server.database(psql: tools.psql))
        let port = self.port
        let idle = Samples()
        let idleUntil = ContinuousClock.now + .seconds(20)
        onThreads(1) { _ in probe(port: port, "/v1/me", token: probeToken, pauseMicros: 10_000, into: idle) { ContinuousClock.now < idleUntil } }
        storm.idle = Percentiles(idle.all.latencies)
        storm.idleMiB = server.statusMiB("VmRSS")
        try server.resetPeakRSS()

        let busy = Samples()
        let done = LockedFlag()
        // Sent from threads of this process on connections opened beforehand: ten curl processes
        // started here cost the machine 10-100 ms of CPU beside the probe as they began.
        let connections = try tokens.map { _ in try BenchHTTPConnection(port: port) }
        let requests = tokens.map { BenchHTTPConnection.request("POST", "/v1/me/imports", token: $0, body: file, contentType: "text/csv") }
        let answers = Answers(count: uploads)
        let prober = Thread { probe(port: port, "/v1/me", token: probeToken, pauseMicros: 10_000, into: busy) { !done.isSet } }
        prober.start()
        let begun = ContinuousClock.now
        onThreads(uploads) { index in
            do {
                answers.set(index, try connections[index].send(prepared: requests[index]).body)
            } catch {
                answers.set(index, "no answer: \(error)")
            }
        }
        var ids: [(token: String, id: String)] = []
        for (answer, token) in zip(answers.all, tokens) {
            if let object = try? JSONSerialization.jsonObject(with: Data(answer.utf8)) as? [String: Any], let id = object["id"] as? String {
                ids.append((token, id))
            } else {
                print("storm upload refused: \(answer.prefix(300))")
            }
        }
        storm.uploadingCount = busy.all.latencies.count
        storm.finished = try await waitForImports(ids, within: .seconds(1800))
        storm.seconds = (ContinuousClock.now - begun).milliseconds / 1000
        done.set()
        try await Task.sleep(for: .milliseconds(200))
        storm.split(busy.all.latencies)
        storm.peakMiB = server.statusMiB("VmHWM")
        server.database(psql: tools.psql).dropBenchUsers(like: "bench\\_storm%")
        storm.wakeDelay = await wakeDelayOnceQuiet(server.database(psql: tools.psql))
        return storm
    }

    /// `WakeDelay` once no job is due and no autovacuum runs (autovacuum may start later), or
    /// nil: the row has no goal, and a busy machine must not cost the storm's figures.
    private func wakeDelayOnceQuiet(_ database: BenchDatabase) async -> WakeDelay? {
        guard (try? await waitUntilQuiet(database)) != nil else { return nil }
        return WakeDelay.measure()
    }

    private func waitUntilQuiet(_ database: BenchDatabase) async throws {
        let begun = ContinuousClock.now
        while try database.scalar("""
            SELECT (SELECT count(*) FROM jobs WHERE run_at <= now())
                 + (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker')
            """) > 0 {
            guard ContinuousClock.now - begun < .seconds(300) else { throw Shell.Failure(description: "jobs due or autovacuum running after 300 s") }
            try await Task.sleep(for: .milliseconds(500))
        }
    }

    /// How many of `imports` ended `done` (the others `failed`, or still running at the deadline).
    private func waitForImports(_ imports: [(token: String, id: String)], within limit: Duration) async throws -> Int {
        let connection = try BenchHTTPConnection(port: port)
        let begun = ContinuousClock.now
        var open = imports, finished = 0
        while !open.isEmpty, ContinuousClock.now - begun < limit {
            open = try open.filter { item in
                let status = try connection.send("GET", "/v1/me/imports/\(item.id)", token: item.token)
                let state = (try? JSONSerialization.jsonObject(with: Data(status.body.utf8)) as? [String: Any])?["status"] as? String
                if state == "done" { finished += 1 }
                return state != "done" && state != "failed"
            }
            try await Task.sleep(for: .milliseconds(250))
        }
        return finished
    }

    /// A Goodreads export just under 10 MiB: 20,000 books with reviews, new works each.
    static func stormFile() -> String {
        let header = "Book Id,Title,Author,Additional Authors,ISBN,ISBN13,Exclusive Shelf,Owned Copies,My Review"
        let review = String(repeating: "A long review of a book read on a train. ", count: 10)
        var text = header + "\n"
        for index in 0..<20_000 {
            text += "\(700_000 + index),\"Storm Work \(index % 4_000)\",Storm Author \(index % 500),,,,read,\(index % 2),\"\(review)\"\n"
        }
        return text
    }
}

/// The uploads' answers, one per thread.
private final class Answers: @unchecked Sendable {
    private let lock = NSLock()
    private var answers: [String]

    init(count: Int) { answers = Array(repeating: "", count: count) }

    func set(_ index: Int, _ answer: String) { lock.withLock { answers[index] = answer } }

    var all: [String] { lock.withLock { answers } }
}

extension ServerUnderTest {
    /// A memory line of the server's `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in MiB.
    func statusMiB(_ field: String) -> Double {
        guard let status = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }),
              let kib = line.split(separator: " ").dropFirst().first.flatMap({ Double($0) }) else { return .nan }
        return kib / 1024
    }

    /// Starts the peak (`VmHWM`) again from the present memory (`clear_refs`, Linux).
    func resetPeakRSS() throws {
        try "5".write(toFile: "/proc/\(process.processIdentifier)/clear_refs", atomically: false, encoding: .utf8)
    }
}
