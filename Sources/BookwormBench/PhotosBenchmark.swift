import Foundation

/// `BookwormBench photos`: 12-megapixel phone JPEGs through `PUT /v1/copies/{id}/photo` from two
/// clients, each made into its six files (three sizes, JPEG and WebP), in images per second,
/// against libvips' own command making the same six files per image (`vips thumbnail`, six runs,
/// two at a time); the server's peak memory with eight uploads at once; and another user's
/// `GET /v1/me` p99 while the uploads run, against idle.
struct PhotosBenchmark {
    let images: Int
    let port: Int
    static let edges = [1600, 480, 160]

    func run() async throws {
        let tools = try LoadTools.find()
        guard let vips = Shell.which("vips") else { throw Shell.Failure(description: "vips is needed: `make deps` installs libvips-tools") }
        let folder = BenchScratch.url("bench-photos-\(getpid())").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        print("making \(images) 4000 × 3000 JPEGs…")
        let files = try (0..<images).map { try Self.phoneJPEG(vips: vips, folder: folder, seed: $0) }

        let reference = try Self.reference(vips: vips, files: files, folder: folder)
        let server = try ServerUnderTest.start(port: port)
        defer { server.stop() }
        let base = "http://127.0.0.1:\(port)"
        let tokens = try (0..<2).map { try BenchAccount.token(curl: tools.curl, base: base, username: "bench_photographer\($0)") }
        let copies = try tokens.map { try Self.copy(curl: tools.curl, base: base, token: $0) }
        let probeToken = try BenchAccount.token(curl: tools.curl, base: base, username: "bench_photo_reader")

        let idle = Samples()
        let idleUntil = ContinuousClock.now + .seconds(20)
        let port = self.port
        onThreads(1) { _ in probe(port: port, "/v1/me", token: probeToken, pauseMicros: 10_000, into: idle) { ContinuousClock.now < idleUntil } }

        let busy = Samples(), done = LockedFlag()
        let prober = Thread { probe(port: port, "/v1/me", token: probeToken, pauseMicros: 10_000, into: busy) { !done.isSet } }
        prober.start()
        let pictures = try files.map { try [UInt8](Data(contentsOf: URL(fileURLWithPath: $0))) }
        let begun = ContinuousClock.now
        let failures = LockedCounter()
        // Each client keeps its connection, as an app does (a process per upload would put its
        // own start-up on the cores beside the server).
        onThreads(2) { client in
            guard let connection = try? BenchHTTPConnection(port: port) else { return failures.add() }
            for (index, picture) in pictures.enumerated() where index % 2 == client {
                let answer = try? connection.send("PUT", "/v1/copies/\(copies[client])/photo", token: tokens[client], body: picture,
                                                  contentType: "image/jpeg")
                if answer?.status != 200 { failures.add() }
            }
        }
        let seconds = (ContinuousClock.now - begun).milliseconds / 1000
        done.set()
        try await Task.sleep(for: .milliseconds(200))
        let sameSizes = try Self.sameSizes(curl: tools.curl, base: base, token: tokens[0], copy: copies[0], reference: reference.sizes)

        try server.resetPeakRSS()
        let before = server.statusMiB("VmRSS")
        let refused = LockedCounter()
        onThreads(8) { index in
            if (try? Self.put(curl: tools.curl, base: base, token: tokens[index % 2], copy: copies[index % 2], file: files[index % files.count])) != true {
                refused.add()
            }
        }
        let peak = server.statusMiB("VmHWM")
        if refused.value > 0 { print("of the 8 uploads at once, \(refused.value) were refused (503: the queue was full)") }
        report(server: Double(images - failures.value) / seconds, failures: failures.value, reference: reference.rate,
               idle: Percentiles(idle.all.latencies), busy: Percentiles(busy.all.latencies), before: before, peak: peak, sameSizes: sameSizes)
    }

    /// A phone-like picture: three bands of Perlin noise (smooth, so it compresses as a photo
    /// does), 4000 × 3000, JPEG quality 90.
    static func phoneJPEG(vips: String, folder: String, seed: Int) throws -> String {
        var bands: [String] = []
        for band in 0..<3 {
            let path = "\(folder)/noise\(seed)-\(band).v"
            _ = try Shell.run(vips, ["perlin", path, "4000", "3000", "--cell-size", "\(97 + 31 * band)", "--seed", "\(seed * 3 + band)"])
            bands.append(path)
        }
        let joined = "\(folder)/joined\(seed).v", bytes = "\(folder)/bytes\(seed).v", out = "\(folder)/phone\(seed).jpg"
        _ = try Shell.run(vips, ["bandjoin", bands.joined(separator: " "), joined])
        _ = try Shell.run(vips, ["linear", joined, bytes, "120", "128", "--uchar"])
        _ = try Shell.run(vips, ["jpegsave", bytes, out, "--Q", "90"])
        for path in bands + [joined, bytes] { try? FileManager.default.removeItem(atPath: path) }
        return out
    }

    /// libvips' own command, as a skilled user would run it for the same six files: one
    /// `vips thumbnail` per file (shrink-on-load each time), two images at a time.
    static func reference(vips: String, files: [String], folder: String) throws -> (rate: Double, sizes: [String: (Int, Int)]) {
        let begun = ContinuousClock.now
        let failures = LockedCounter()
        onThreads(2) { worker in
            for (index, file) in files.enumerated() where index % 2 == worker {
                for edge in edges {
                    for format in ["jpg[Q=82,strip,optimize_coding]", "webp[Q=80,strip]"] {
                        let out = "\(folder)/ref\(index)-\(edge).\(format)"
                        if (try? Shell.run(vips, ["thumbnail", file, out, "\(edge)", "--height", "\(edge)", "--size", "down"])) == nil { failures.add() }
                    }
                }
            }
        }
        let seconds = (ContinuousClock.now - begun).milliseconds / 1000
        guard failures.value == 0 else { throw Shell.Failure(description: "vips thumbnail failed \(failures.value) times") }
        var sizes: [String: (Int, Int)] = [:]
        let header = Shell.which("vipsheader") ?? "vipsheader"
        for edge in edges {
            let path = "\(folder)/ref0-\(edge).jpg"
            let width = Int(try Shell.run(header, ["-f", "width", path]).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            let height = Int(try Shell.run(header, ["-f", "height", path]).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            sizes["\(edge)"] = (width, height)
        }
        return (Double(files.count) / seconds, sizes)
    }

    static func copy(curl: String, base: String, token: String) throws -> String {
        let body = #"{"isbn": "9780441478125", "title": "The Left Hand of Darkness", "authors": ["Ursula K. Le Guin"], "condition": "good"}"#
        let text = try Shell.run(curl, ["-s", "-X", "POST", base + "/v1/me/copies", "-H", "Authorization: Bearer \(token)",
                                        "-H", "content-type: application/json", "-d", body])
        guard let id = (try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])?["id"] as? String else {
            throw Shell.Failure(description: "copy: \(text.prefix(300))")
        }
        return id
    }

    /// True when the server answered 200 with the photo.
    static func put(curl: String, base: String, token: String, copy: String, file: String) throws -> Bool {
        // Without `Expect:` curl asks for a 100 Continue before a body over 1 MiB and, unanswered,
        // waits a second before sending it (phones' HTTP stacks do not ask).
        let status = try Shell.run(curl, ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT", base + "/v1/copies/\(copy)/photo",
                                          "-H", "Authorization: Bearer \(token)", "-H", "Content-Type: image/jpeg", "-H", "Expect:",
                                          "--data-binary", "@" + file])
        return status.trimmingCharacters(in: .whitespacesAndNewlines) == "200"
    }

    /// Whether the server's full size of the last photo has the reference's dimensions.
    static func sameSizes(curl: String, base: String, token: String, copy: String, reference: [String: (Int, Int)]) throws -> Bool {
        let text = try Shell.run(curl, ["-s", base + "/v1/copies/\(copy)", "-H", "Authorization: Bearer \(token)"])
        guard let photo = (try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])?["photo"] as? [String: Any],
              let width = photo["width"] as? Int, let height = photo["height"] as? Int, let full = reference["1600"] else { return false }
        return (width, height) == full
    }

    func report(server: Double, failures: Int, reference: Double, idle: Percentiles, busy: Percentiles, before: Double, peak: Double,
                sameSizes: Bool) {
        let ratio = server / reference
        print("""

            photos: \(images) JPEGs of 4000 × 3000, each into thumb/card/full × JPEG/WebP, 2 clients
              server (PUT over HTTP)       \(String(format: "%.2f", server)) images/s\(failures > 0 ? " (\(failures) failed)" : "")
              vips thumbnail, 6 runs each  \(String(format: "%.2f", reference)) images/s
              ratio                        \(String(format: "%.2f", ratio)) × (goal ≥ 0.8) \(ratio >= 0.8 ? "met" : "NOT met"); same full size: \(sameSizes)
              peak RSS, 8 uploads at once  \(String(format: "%.0f", peak)) MiB (\(String(format: "%.0f", before)) before; goal ≤ 600)
              GET /v1/me p99               \(String(format: "%.2f", busy.p99)) ms during, \(String(format: "%.2f", idle.p99)) ms idle \
            (\(String(format: "%.2f", busy.p99 / idle.p99)) ×, goal ≤ 2)
            """)
        BenchResults.save("photos", [
            ResultRow("photos made (PUT, 2 clients)", server, "images/s", reference: "vips thumbnail \(String(format: "%.2f", reference)) images/s",
                      ratio: ratio, goal: ">= 0.8 x", met: ratio >= 0.8 && failures == 0 && sameSizes),
            ResultRow("server peak RSS, 8 uploads at once", peak, "MiB", goal: "<= 600 MiB", met: peak <= 600),
            ResultRow("GET /v1/me p99 during uploads", busy.p99, "ms", reference: "idle \(String(format: "%.2f", idle.p99)) ms",
                      ratio: busy.p99 / idle.p99, goal: "<= 2 x", met: busy.p99 <= 2 * idle.p99),
        ])
    }
}

/// A count shared by threads.
final class LockedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    var value: Int { lock.withLock { count } }
    func add() { lock.withLock { count += 1 } }
}
