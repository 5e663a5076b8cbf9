import BookwormCore
import Foundation
import Logging
import NIOPosix
import Places
import PostgresNIO
import ServiceLifecycle

/// Imports: the upload is looked at (its first bytes) and stored in parts as it arrives, then
/// queued; the job reads the file under `ImportBudget` and imports chunks, each one transaction
/// that moves the progress, so a crash resumes where it stopped and the user watches `done` grow.
package struct ImportService: Sendable {
    let client: Database
    let store: ImportStore
    let batch: ImportBatch
    let pins: PinsService
    let policy: ImportPolicy
    let clock: any AppClock
    let logger: Logger
    /// Parts stored at once by this service (the API's one). Ten uploads arriving together each
    /// wrote a part at once: ten backends and the event loops kept both cores full, and another
    /// user's `GET /v1/me` waited behind them (p50 about 2 ms, p90 9-12 ms while ten 9 MiB files
    /// arrived; with two at a time 0.5-0.8 ms and 3-8 ms, the uploads 10 % slower).
    let partWrites = Turns(2)
    /// The process's upload budget, which the API's service shares with photos.
    let pace: UploadPace?

    package init(client: Database, policy: ImportPolicy, clock: any AppClock, logger: Logger, pace: UploadPace? = nil) {
        self.client = client
        self.store = ImportStore(client: client, logger: logger)
        self.batch = ImportBatch(logger: logger)
        self.pins = PinsService(client: client, logger: logger)
        self.policy = policy
        self.clock = clock
        self.logger = logger
        self.pace = pace
    }

    static func plan(_ data: Data, format: ImportFormat, maxRows: Int, budget: ImportBudget = ImportBudget()) throws -> ImportPlan {
        switch format {
        case .goodreads: try GoodreadsImport.plan(data, maxRows: maxRows, budget: budget)
        case .librarything: try LibraryThingImport.plan(data, maxRows: maxRows, budget: budget)
        case .bookworm: try BookwormImport.plan(data, maxRows: maxRows, budget: budget)
        }
    }

    /// The upload is stored as it arrives, a part at a time (`import_parts`), after a look at its
    /// first bytes only; the import job reads it on a thread of low priority, one file at a time. An upload that does not
    /// complete leaves nothing behind.
    func start<Body: AsyncSequence>(user: UUID, format: ImportFormat, body: Body) async throws -> ImportView
        where Body.Element == ByteBuffer
    {
        var upload = ImportUpload(limit: policy.maxBytes)
        var chunks = body.makeAsyncIterator(), tab = UploadPace.Tab(pace)
        while upload.pending.readableBytes < ImportSniff.headBytes, let chunk = try await chunks.next() {
            try upload.add(chunk)
            try await tab.add(chunk.readableBytes)
        }
        guard upload.received > 0 else { throw AppError.broken("file", "is empty") }
        try ImportSniff.check(Data(upload.pending.readableBytesView), format: format)
        let now = clock.now()
        // The upload is stored outside a keyed request's held transaction, which would keep a
        // connection and the key's lock for as long as a slow client sends; the key is claimed
        // by `queue`, the write that makes the import happen. An upload never queued is swept.
        let id = try await HeldTransaction.$current.withValue(nil) { () async throws -> UUID in
            guard let id = try await client.transaction(logger: logger, { try await store.create(user: user, format: format, now: now, on: $0) }) else {
                throw AppError.conflict(code: "import_in_progress", detail: "An import of yours is still running: wait for it to finish", field: nil)
            }
            do {
                var seq = 0
                while let chunk = try await chunks.next() {
                    try upload.add(chunk)
                    try await tab.add(chunk.readableBytes)
                    guard let part = upload.takePart() else { continue }
                    try await partWrites.run { try await store.addPart(id, seq: seq, bytes: part) }
                    seq += 1
                }
                try await tab.settle()
                if let last = upload.takePart(final: true) {
                    try await partWrites.run { try await store.addPart(id, seq: seq, bytes: last) }
                }
            } catch {
                try? await store.discard(id)
                throw error
            }
            return id
        }
        do {
            try await client.transaction(logger: logger) { try await store.queue(id, on: $0) }
        } catch {
            try? await store.discard(id)
            throw error
        }
        return try await view(id, user: user)
    }

    /// Housekeeping's part: uploads an hour old and still `uploading` will never complete (the
    /// idle timeout ends a stalled one long before), so their parts go.
    package func dropAbandonedUploads() async throws {
        try await store.dropAbandoned(before: clock.now().addingTimeInterval(-3600))
    }

    func view(_ id: UUID, user: UUID) async throws -> ImportView {
        guard let view = try await store.view(id, user: user) else { throw AppError.notFound("No import with id \(id.apiString)") }
        return view
    }

    /// Up to `policy.chunksPerRun` chunks, each its own transaction that moves the progress, with
    /// a rest between two; the file is parsed once per run. True when the import is finished;
    /// false when the run ends first (its chunks done, `policy.runLimit` reached, the worker
    /// stopping), and the job is due again at once.
    func runChunks(_ id: UUID) async throws -> Bool {
        // A stopping worker leaves the import due again rather than start a run it would hold up.
        if Task.isShuttingDownGracefully { return false }
        let started = ContinuousClock.now
        guard let snapshot = try await client.transaction(logger: logger, { try await store.lockPending(id, on: $0) }) else { return true }
        let plan: ImportPlan
        do {
            let (payload, format, maxRows) = (snapshot.payload, snapshot.format, policy.maxRows)
            plan = try await LowPriorityThread.background(idle: policy.readsIdle) { try Self.plan(payload, format: format, maxRows: maxRows) }
        } catch {
            // Whatever reading the file throws is the file's fault: the job must not retry it forever.
            let message = (error as? AppError).map(Self.fileMessage) ?? "cannot be read"
            try await store.fail(id, message: message, now: clock.now())
            return true
        }
        if snapshot.total != plan.total { try await store.setTotal(id, plan.total) }
        let pins = plan.pins.isEmpty ? ([:], []) : try await importPins(plan.pins, user: snapshot.user)
        let chunks = max(1, policy.chunksPerRun)
        for index in 0..<chunks {
            // A chunk and its rest are one turn of the runner's: its quick jobs go between two.
            let (finished, goOn) = try await JobTurn.run {
                let begun = ContinuousClock.now
                if try await runChunk(id, plan: plan, pins: pins) { return (true, false) }
                guard index + 1 < chunks else { return (false, false) }
                return (false, await rest(after: ContinuousClock.now - begun + JobTurn.quickWorkSinceLastAsked(), runStarted: started))
            }
            if finished { return true }
            if !goOn { return false }
        }
        return false
    }

    /// Rests `policy.rest(after: work)` on the app's clock (the work is timed on the machine's:
    /// the rest gives back the cores the chunk took). False when the run should end instead: the
    /// rest would take it to `policy.runLimit`, or the worker is stopping.
    private func rest(after work: Duration, runStarted: ContinuousClock.Instant) async -> Bool {
        let rest = policy.rest(after: work)
        guard ContinuousClock.now - runStarted + rest < policy.runLimit else { return false }
        if rest > .zero {
            do {
                try await cancelWhenGracefulShutdown { [clock] in try await clock.sleep(for: rest) }
            } catch {
                return false
            }
        }
        return !Task.isShuttingDownGracefully
    }

    /// An import whose runs keep failing (or killing their worker) ends failed rather than retried forever.
    func giveUp(_ id: UUID, attempts: Int) async throws {
        try await store.fail(id, message: "could not be imported: its import stopped \(attempts) times in a row", now: clock.now())
    }

    /// What a refused file's error says about it, without the field name.
    static func fileMessage(_ error: AppError) -> String {
        let detail = error.problemDetail
        return detail.hasPrefix("file: ") ? String(detail.dropFirst(6)) : detail
    }

    private func runChunk(_ id: UUID, plan: ImportPlan, pins: ([String: UUID], [ImportLineError])) async throws -> Bool {
        try await client.transaction(logger: logger) { connection in
            guard let pending = try await store.lockProgress(id, on: connection) else { return true }
            let context = ImportBatch.Context(user: pending.user, defaultPin: try await batch.defaultPin(of: pending.user, on: connection),
                                               pins: pins.0, now: clock.now())
            var outcome = ImportOutcome()
            if pending.done == 0 { outcome.errors = plan.errors + pins.1 }
            let chunk = plan.records.dropFirst(max(0, pending.done - plan.errors.count)).prefix(policy.chunk)
            var skipped = 0
            for one in try await apply(Array(chunk), context, on: connection) {
                outcome.books += one.books
                outcome.copies += one.copies
                outcome.readings += one.readings
                outcome.wishes += one.wishes
                outcome.errors += one.errors
                if one.createdNothing && one.errors.isEmpty { skipped += 1 }
            }
            let done = (pending.done == 0 ? plan.errors.count : pending.done) + chunk.count
            let finished = done >= plan.total
            try await store.progress(id, done: done, outcome: outcome, skipped: skipped, finished: finished, now: clock.now(), on: connection)
            return finished
        }
    }

    /// The chunk in a few set-based statements; if one fails, the same statements one record at
    /// a time under savepoints, so a record the database refuses is reported on its line and the
    /// others still go in.
    private func apply(_ records: [ImportRecord], _ context: ImportBatch.Context, on connection: PostgresConnection) async throws
        -> [ImportOutcome]
    {
        do {
            return try await underSavepoint(on: connection) { try await batch.apply(records, context, on: connection) }
        } catch let error as PSQLError {
            logger.warning("import batch refused; importing record by record",
                           metadata: ["error": .string(error.serverInfo?[.message] ?? "\(error.code)")])
        }
        var outcomes: [ImportOutcome] = []
        for record in records {
            do {
                outcomes += try await underSavepoint(on: connection) { try await batch.apply([record], context, on: connection) }
            } catch let error as PSQLError {
                let detail = error.serverInfo?[.message] ?? "database error"
                outcomes.append(ImportOutcome(errors: [ImportLineError(line: record.line, message: "could not be imported: \(detail)")]))
            }
        }
        return outcomes
    }

    /// `body`'s statements kept, or undone (and the error rethrown) without aborting the chunk.
    private func underSavepoint<T>(on connection: PostgresConnection, _ body: () async throws -> T) async throws -> T {
        try await store.savepoint("import_part", on: connection)
        do {
            let result = try await body()
            try await store.release("import_part", on: connection)
            return result
        } catch let error as PSQLError {
            try await store.rollback(to: "import_part", on: connection)
            throw error
        }
    }

    /// A Bookworm export's pins, found again by their import key or made.
    private func importPins(_ exported: [ImportPin], user: UUID) async throws -> ([String: UUID], [ImportLineError]) {
        var ids: [String: UUID] = [:]
        var errors: [ImportLineError] = []
        for pin in exported {
            guard let kind = PinKind(rawValue: pin.kind), !pin.label.isEmpty, (-90...90).contains(pin.latitude),
                  (-180...180).contains(pin.longitude) else {
                errors.append(ImportLineError(line: pin.line, message: "pins.json: not a valid pin"))
                continue
            }
            do {
                ids[pin.key] = try await pins.importPin(owner: user, key: pin.key, label: pin.label, kind: kind,
                                                        point: GeoPoint(latitude: pin.latitude, longitude: pin.longitude),
                                                        makeDefault: pin.isDefault)
            } catch let error as AppError {
                errors.append(ImportLineError(line: pin.line, message: "pins.json: \(error.problemDetail)"))
            }
        }
        return (ids, errors)
    }
}
