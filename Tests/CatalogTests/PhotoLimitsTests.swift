import Foundation
import Synchronization
import HTTPTypes
import HummingbirdTesting
import Testing
import CVipsProbes
@testable import BookwormApp
@testable import BookwormCore
@testable import BookwormTestSupport
@testable import Catalog

/// What bounds a photo's cost: at most `BOOKWORM_IMAGE_CONCURRENCY` threads with
/// `BOOKWORM_IMAGE_QUEUE` more waiting (past that an upload is shed at once), no libvips cache,
/// and a decode deadline in CPU time.
@Suite struct PhotoLimitsTests {
    @Test func pastItsThreadsAndQueueAnUploadIs503WithRetryAfter() async throws {
        let maker = try PhotoMaker(settings: .ordinaryThreads(concurrency: 1, queueLimit: 0))
        let large = try TestPictures.made("jpg", "black", "OUT", "4000", "3000", "--bands", "3"), small = try TestPictures.phoneJPEG()
        let first = Task { try await maker.make(large) }
        while maker.admittedCount == 0 { await Task.yield() }
        do {
            _ = try await maker.make(small)
            Issue.record("a second photo was taken while the only thread was busy")
        } catch AppError.overloaded(let retryAfter) {
            #expect(retryAfter >= 1)
        }
        #expect(try await first.value.width == 1600)
    }

    /// Memory has a known ceiling: libvips keeps no cache of operations, pixels or files, and
    /// each picture's pipeline runs on the photo thread alone.
    @Test func libvipsKeepsNoCacheAndOneThreadPerPicture() async throws {
        let maker = try PhotoMaker(settings: .ordinaryThreads(concurrency: 1, queueLimit: 0))
        _ = try await maker.make(try TestPictures.phoneJPEG())
        var operations: Int32 = -1, bytes = 1, files: Int32 = -1, threads: Int32 = -1
        bw_probe_limits(&operations, &bytes, &files, &threads)
        #expect(operations == 0 && bytes == 0 && files == 0)
        #expect(threads == 1)
    }

    @Test func theVariablesSetThreadsAndQueue() throws {
        let set = try Config.fromEnvironment(["BOOKWORM_IMAGE_CONCURRENCY": "1", "BOOKWORM_IMAGE_QUEUE": "0"]).photos
        #expect(set.concurrency == 1 && set.queueLimit == 0)
        #expect(try Config.fromEnvironment(["BOOKWORM_IMAGE_CONCURRENCY": "3"]).photos.queueLimit == 6)
        let unset = try Config.fromEnvironment([:]).photos
        #expect(unset.concurrency == ProcessInfo.processInfo.activeProcessorCount && unset.queueLimit == 2 * unset.concurrency)
        for bad in ["0", "many", "257"] {
            #expect(throws: ConfigError.self, "\(bad)") { try Config.fromEnvironment(["BOOKWORM_IMAGE_CONCURRENCY": bad]) }
        }
        #expect(throws: ConfigError.self) { try Config.fromEnvironment(["BOOKWORM_IMAGE_QUEUE": "-1"]) }
        // Photo threads and an import's reading run in SCHED_IDLE unless the operator says otherwise.
        let unsetImports = try Config.fromEnvironment([:]).imports
        #expect(unset.idle && unsetImports.readsIdle)
        let ordinary = try Config.fromEnvironment(["BOOKWORM_IMAGE_CONCURRENCY": "2", "BOOKWORM_BACKGROUND_IDLE": "false"])
        #expect(!ordinary.photos.idle && !ordinary.imports.readsIdle)
        #expect(throws: ConfigError.self) { try Config.fromEnvironment(["BOOKWORM_BACKGROUND_IDLE": "sometimes"]) }
    }

    /// Over HTTP: one thread and no queue, four large uploads at once. Those shed are 503
    /// problem+json with `Retry-After`; the others are made; each copy has a photo or none.
    @Test func uploadsPastTheThreadAreShedWith503AndRetryAfter() async throws {
        try await withApp(configure: { $0.photos.concurrency = 1; $0.photos.queueLimit = 0 }) { app in
            let owner = try await app.register()
            // A PNG: every pixel is inflated (a JPEG would be decoded at an eighth of its size).
            let large = try TestPictures.made("png", "black", "OUT", "6000", "6000", "--bands", "3")
            var copies: [String] = []
            for _ in 0..<4 { copies.append(try #require(try await app.addCopy(owner.token)["id"] as? String)) }
            let answers = try await withThrowingTaskGroup(of: (String, TestResponse).self) { group in
                for copy in copies {
                    group.addTask { (copy, try await app.putPhoto(copy, large, type: "image/png", token: owner.token)) }
                }
                return try await group.reduce(into: [(String, TestResponse)]()) { $0.append($1) }
            }
            let shed = answers.filter { $0.1.status == .serviceUnavailable }
            #expect(answers.allSatisfy { $0.1.status == .ok || $0.1.status == .serviceUnavailable })
            #expect(!shed.isEmpty && shed.count < 4, "\(answers.map(\.1.status))")
            for (copy, answer) in answers {
                let view = try await app.request(.get, "/v1/copies/\(copy)").jsonObject()
                if answer.status == .ok {
                    #expect(view["photo"] is [String: Any])
                } else {
                    #expect(answer.headers[.retryAfter] == "1")
                    #expect(answer.headers[.contentType] == "application/problem+json")
                    #expect(view["photo"] is NSNull)
                }
            }
        }
    }

    /// A photo past the process's 4 MiB burst is read at the upload pace it shares with imports
    /// (`BOOKWORM_UPLOAD_MIB_PER_SECOND`): at 1 MiB/s, each MiB past the burst waits a second of the app's clock.
    @Test func aPhotoPastTheBurstIsReadAtTheUploadPace() async throws {
        try await withApp(configure: { $0.uploadBytesPerSecond = 1 << 20 }) { app in
            let me = try await app.register()
            let picture = try TestPictures.made("png", "gaussnoise", "OUT", "2800", "2200")
            #expect(picture.count > 5 << 20)
            let id = try #require(try await app.addCopy(me.token)["id"] as? String)
            #expect(app.clock.sleeperCount == 0)
            let finished = Mutex(false)
            let put = Task {
                defer { finished.withLock { $0 = true } }
                return try await app.putPhoto(id, picture, type: "image/png", token: me.token)
            }
            let waited = try await app.clock.advanceWhileAsleep(step: 0.25) { finished.withLock { $0 } }
            #expect(try await put.value.status == .ok)
            #expect(waited >= Double(picture.count - (4 << 20)) / Double(1 << 20) - 0.25)
        }
    }

    @Test func aDecodePastItsDeadlineStopsAndIsNotThePicturesFault() throws {
        let black = try TestPictures.made("jpg", "black", "OUT", "4000", "3000", "--bands", "3")
        let sideways = TestPictures.withPhoneMetadata(black)
        var settings = PhotoMaker.Settings(concurrency: 1)
        settings.deadlineSeconds = 0.000_001
        do {
            _ = try PhotoMaker.makeNow(sideways, settings: settings)
            Issue.record("a decode past its deadline was finished")
        } catch let refusal as PhotoRefusal {
            guard case .timedOut = refusal else {
                Issue.record("\(refusal)")
                return
            }
            // A stored upload is not dropped for it; an uploader is told the picture cannot be read.
            #expect(!refusal.isThePicturesFault)
            guard case .unprocessableBecause(let code, _, _) = refusal.appError else {
                Issue.record("\(refusal.appError)")
                return
            }
            #expect(code == "image_unreadable")
        }
        settings.deadlineSeconds = 20
        let made = try PhotoMaker.makeNow(sideways, settings: settings)
        #expect(made.width == 1200 && made.height == 1600)
    }

    /// Photo threads run in SCHED_IDLE, so a busy machine can keep a good picture from a core for
    /// longer than its deadline; only the work done for it counts, so it is made, not refused.
    @Test func aDecodeWaitingForCoresIsNotOutOfTime() async throws {
        let picture = TestPictures.withPhoneMetadata(try TestPictures.made("jpg", "black", "OUT", "4000", "3000", "--bands", "3"))
        var twoSeconds = PhotoMaker.Settings(concurrency: 1)
        twoSeconds.deadlineSeconds = 2
        let settings = twoSeconds
        let decoding = Atomic(true)
        let made = try await withCheckedThrowingContinuation { (done: CheckedContinuation<MadePhoto, Error>) in
            Thread {
                // Many ordinary threads share the cores with the decode for four seconds at most
                // (the rest of the suite shares them too): it waits more than two seconds for
                // them while working much less than that.
                let until = ContinuousClock.now + .seconds(4)
                for _ in 0..<16 * ProcessInfo.processInfo.activeProcessorCount {
                    Thread { while decoding.load(ordering: .relaxed), ContinuousClock.now < until {} }.start()
                }
                done.resume(with: Result { try PhotoMaker.makeNow(picture, settings: settings) })
                decoding.store(false, ordering: .relaxed)
            }.start()
        }
        #expect(made.width == 1200 && made.height == 1600)
    }
}

extension PhotoMaker.Settings {
    /// Photo threads at ordinary priority: in `SCHED_IDLE` a full run's load would starve them.
    static func ordinaryThreads(concurrency: Int, queueLimit: Int) -> Self {
        var settings = Self(concurrency: concurrency, queueLimit: queueLimit)
        settings.idle = false
        return settings
    }
}
