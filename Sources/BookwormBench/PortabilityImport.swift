import BookwormCore
import Foundation

struct ImportRun {
    var lines = 0
    var seconds = 0.0
    var created: [String: Int] = [:]
    var errors = 0
    var idle = Percentiles([])
    var during = Percentiles([])
    var duringCount = 0

    var rowsPerSecond: Double { Double(lines) / max(seconds, 0.001) }
}

extension PortabilityBenchmark {
    /// A Goodreads file of `lines` books (half with ISBNs of catalogue books, half new works),
    /// uploaded by a fresh importer; the server's own worker imports it while another user keeps
    /// reading the library.
    func importFile(tools: LoadTools, base: String, database: BenchDatabase) async throws -> ImportRun {
        let importer = "\(Self.importer)_\(Int(Date().timeIntervalSince1970))"
        let token = try BenchAccount.token(curl: tools.curl, base: base, username: importer)
        let readerToken = try BenchAccount.token(curl: tools.curl, base: base, username: Self.reader)
        let isbns = try database.lines("SELECT isbn13 FROM books WHERE isbn13 IS NOT NULL ORDER BY id LIMIT \(lines / 2)")
        let path = BenchScratch.url("bench-goodreads-\(getpid()).csv").path
        try Self.goodreads(lines: lines, isbns: isbns).write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }

        let port = self.port
        let idle = Samples()
        let idleUntil = ContinuousClock.now + .seconds(3)
        onThreads(1) { _ in probe(port: port, "/v1/copies?limit=20", token: readerToken, pauseMicros: 5_000, into: idle) { ContinuousClock.now < idleUntil } }

        var run = ImportRun()
        run.lines = lines
        let during = Samples()
        let done = LockedFlag()
        let reader = Thread { probe(port: port, "/v1/copies?limit=20", token: readerToken, pauseMicros: 5_000, into: during) { !done.isSet } }
        let begun = ContinuousClock.now
        let answer = try Shell.run(tools.curl, ["-s", "-X", "POST", base + "/v1/me/imports", "-H", "Authorization: Bearer \(token)",
                                                 "-H", "Content-Type: text/csv", "--data-binary", "@" + path])
        guard let object = try JSONSerialization.jsonObject(with: Data(answer.utf8)) as? [String: Any], let id = object["id"] as? String else {
            throw Shell.Failure(description: "import not started: \(answer.prefix(300))")
        }
        reader.start()
        let connection = try BenchHTTPConnection(port: port)
        while ContinuousClock.now - begun < .seconds(900) {
            let status = try connection.send("GET", "/v1/me/imports/\(id)", token: token)
            if let object = try JSONSerialization.jsonObject(with: Data(status.body.utf8)) as? [String: Any],
               ["done", "failed"].contains(object["status"] as? String ?? "") {
                run.created = object["created"] as? [String: Int] ?? [:]
                run.errors = (object["errors"] as? [Any])?.count ?? 0
                break
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        run.seconds = (ContinuousClock.now - begun).milliseconds / 1000
        done.set()
        try await Task.sleep(for: .milliseconds(200))
        run.idle = Percentiles(idle.all.latencies)
        run.during = Percentiles(during.all.latencies)
        run.duringCount = during.all.latencies.count
        database.dropBenchUsers(like: "bench\\_importer\\_%")
        return run
    }

    static func goodreads(lines: Int, isbns: [String]) -> String {
        let header = "Book Id,Title,Author,Author l-f,Additional Authors,ISBN,ISBN13,My Rating,Average Rating,Publisher,Binding,"
            + "Number of Pages,Year Published,Original Publication Year,Date Read,Date Added,Bookshelves,Bookshelves with positions,"
            + "Exclusive Shelf,My Review,Spoiler,Private Notes,Read Count,Recommended For,Recommended By,Owned Copies,"
            + "Original Purchase Date,Original Purchase Location,Condition,Condition Description,BCID"
        let shelves = ["read", "currently-reading", "to-read", "read"]
        var text = header + "\r\n"
        for index in 0..<lines {
            let isbn = index < isbns.count ? "\"=\"\"\(isbns[index])\"\"\"" : "\"=\"\"\"\"\""
            let owned = index % 3 == 0 ? "1" : "0"
            text += "\(900_000 + index),\"Imported Work \(index), a Novel\",Author \(index % 997),,,\"=\"\"\"\"\",\(isbn),0,4.0,,,"
                + ",,,2020/01/0\(index % 9 + 1),2019/12/01,,,\(shelves[index % 4]),,,,1,,,\(owned),,,,,\r\n"
        }
        return text
    }

    func report(logRows: Int, full: FullSync, delta: Delta, imported: ImportRun, storm: ImportStorm) {
        let sql = Percentiles(delta.timings)
        print("")
        print(Table(rows: [
            ["measure", "value", "p99 / detail", "reference / target", "met"],
            ["(a) full sync over HTTP, \(full.objects) objects in \(full.pages) pages of 1,000",
             String(format: "%.2f s", full.seconds), String(format: "%.0f objects/s", Double(full.objects) / max(full.seconds, 0.001)),
             "-", "-"],
            ["(b) delta of \(changes) changes, page statement p50 (\(delta.timings.count) runs, \(logRows) log rows)",
             String(format: "%.3f ms", sql.p50), String(format: "p99 %.3f ms; %d rows", sql.p99, delta.rows), "p50 <= 5 ms",
             sql.p50 <= 5 && delta.rows == changes ? "yes" : "NO"],
            ["(c) import of a \(imported.lines)-line Goodreads file", String(format: "%.0f rows/s", imported.rowsPerSecond),
             String(format: "%.1f s; created %@; %d errors", imported.seconds, "\(imported.created)", imported.errors), "-", "-"],
            ["    another user's GET /v1/copies idle", String(format: "%.2f ms", imported.idle.p50),
             String(format: "p99 %.2f ms", imported.idle.p99), "-", "-"],
            ["    the same during the import", String(format: "%.2f ms", imported.during.p50),
             String(format: "p99 %.2f ms (%d requests)", imported.during.p99, imported.duringCount), "-", "-"],
            ["(d) \(storm.uploads) uploads of \(storm.bytes >> 10) KiB at once, imported",
             String(format: "%.1f s", storm.seconds), "\(storm.finished) of \(storm.uploads) done", "-", "-"],
            ["    another user's GET /v1/me p99 during (d)", String(format: "%.2f ms", storm.busy.p99),
             String(format: "idle %.2f ms; %d requests during", storm.idle.p99, storm.busyCount), "<= 2 x idle", storm.p99Met ? "yes" : "NO"],
            ["      while uploading (p50, p90, p99); while importing (p99)",
             String(format: "%.2f, %.2f, %.2f ms; %.2f ms", storm.uploading.p50, storm.uploading.p90, storm.uploading.p99, storm.importingP99),
             String(format: "%d requests, then %d", storm.uploadingCount, storm.busyCount - storm.uploadingCount), "-", "-"],
            ["    server peak memory during (d)", String(format: "%.0f MiB", storm.peakMiB),
             String(format: "idle %.0f MiB", storm.idleMiB), "<= idle + 128 MiB", storm.memoryMet ? "yes" : "NO"],
            ["    a loopback round trip beside one core of bursty work (WakeDelay)",
             storm.wakeDelay.map { String(format: "%+.2f ms", $0.addedMillis) } ?? "-",
             storm.wakeDelay.map { Self.wakeDetail($0, probeIdle: storm.idle.p99) } ?? "not measured", "-", "-"],
        ]).render())
        BenchResults.save("portability", [
            ResultRow("full sync, \(full.objects) objects", Double(full.objects) / max(full.seconds, 0.001), "objects/s"),
            ResultRow("delta sync page statement p50", sql.p50, "ms", goal: "<= 5 ms", met: sql.p50 <= 5 && delta.rows == changes),
            ResultRow("Goodreads import", imported.rowsPerSecond, "rows/s",
                      reference: String(format: "library p50 %.2f ms idle, %.2f ms during", imported.idle.p50, imported.during.p50)),
            ResultRow("GET /v1/me p99 while \(storm.uploads) imports of 10 MiB arrive", storm.busy.p99, "ms",
                      reference: String(format: "idle %.2f ms; while uploading p50 %.2f, p90 %.2f, p99 %.2f ms (%d requests); then p99 %.2f ms (%d)",
                                        storm.idle.p99, storm.uploading.p50, storm.uploading.p90, storm.uploading.p99, storm.uploadingCount,
                                        storm.importingP99, storm.busyCount - storm.uploadingCount),
                      ratio: storm.busy.p99 / max(storm.idle.p99, 0.001),
                      goal: "<= 2 x", met: storm.p99Met),
            ResultRow("server peak memory during the same", storm.peakMiB, "MiB", reference: String(format: "idle %.0f MiB", storm.idleMiB),
                      goal: String(format: "<= %.0f MiB", storm.idleMiB + 128), met: storm.memoryMet),
        ] + (storm.wakeDelay.map {
            [ResultRow("a loopback round trip beside one core of bursty work, no project code (echo p99)", $0.busy.p99, "ms",
                       reference: Self.wakeDetail($0, probeIdle: storm.idle.p99))]
        } ?? []))
    }

    /// The echo's two p99s, and the storm probe's idle p99 with their difference added, as a ratio.
    static func wakeDetail(_ delay: WakeDelay, probeIdle: Double) -> String {
        String(format: "echo p99 idle %.2f ms, beside the work %.2f ms; the idle probe plus the difference: %.1f x", delay.idle.p99,
               delay.busy.p99, delay.ratio(onIdle: probeIdle))
    }
}
