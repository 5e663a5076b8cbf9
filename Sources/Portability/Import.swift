import BookwormCore
import Foundation

/// Upload limits and how much one job run imports.
package struct ImportPolicy: Sendable {
    package var maxBytes = 10 << 20
    package var maxRows = 20_000
    /// Records per chunk (one transaction): a long import never holds back sync or vacuum long.
    package var chunk = 500
    /// Chunks per job run: 20,000 records at most.
    package var chunksPerRun = 40
    /// A run ends after the chunk past which a rest would take it this long (reading the file
    /// included), and the job is due again: a job may start at half its 5-minute lease, and is
    /// not renewed while it runs.
    package var runLimit = Duration.seconds(60)
    /// After each chunk the import rests this share (percent) of the time the chunk took, and
    /// the runner's quick batches since the last (`BOOKWORM_IMPORT_REST_PERCENT`; 0: none). A
    /// chunk keeps about a core busy (its statements' backend, then the worker); with both cores
    /// busy, a request's thread waits for a core. Ten 9 MiB imports at once (`BookwormBench
    /// portability`): another user's `GET /v1/me` p99 while they were imported was 1.8-2.8 ms in
    /// eight runs at 100, median 2.0 (idle 1.0-1.15), against 2.1-3.6 ms without rest, median
    /// 2.75; the imports took 40-49 s instead of 23, and about 80 s once their copies' alerts ran
    /// (and were rested for) between their chunks rather than after them all.
    package var restPercent = 100
    /// The file is read on the background thread in `SCHED_IDLE` (`LowPriorityThread`); tests
    /// turn it off, as they do for photos.
    package var readsIdle = true

    /// The rest after a chunk that took `work` of the machine's time: a share of what the chunk
    /// actually cost, however the database and the cores fared.
    func rest(after work: Duration) -> Duration {
        work * (Double(max(0, restPercent)) / 100)
    }

    package init() {}
}

enum ImportFormat: String, Sendable {
    case goodreads, librarything, bookworm

    init?(contentType: String) {
        switch contentType.split(separator: ";").first.map({ $0.trimmingCharacters(in: .whitespaces).lowercased() }) {
        case "text/csv": self = .goodreads
        case "application/json": self = .librarything
        case "application/zip": self = .bookworm
        default: return nil
        }
    }
}

/// One book of an import file: what to make of it for its owner.
struct ImportRecord: Sendable {
    let line: Int
    /// The source's identity for this book (Goodreads book id, LibraryThing books_id, an
    /// exported copy's id): the copies made from it carry it, so a second run makes none.
    let key: String
    /// As written in the file; nil when it has none.
    let isbn: String?
    let title: String
    let authors: [String]
    var reading: String?
    var private_: Bool = false
    var startedOn: String?
    var finishedOn: String?
    var copies = 0
    var condition = "good"
    var notes: String?
    var wish = false
    var wishAnyEdition = true
    var wishRadiusKm = 25.0
    var wishMinCondition: String?
    /// The exported pin a copy or wish sat on (Bookworm zips).
    var pinKey: String?
}

/// An exported pin (Bookworm zips only).
struct ImportPin: Sendable {
    let line: Int
    let key: String
    let label: String
    let kind: String
    let latitude: Double
    let longitude: Double
    let isDefault: Bool
}

struct ImportLineError: Error, Codable, Sendable, Equatable {
    let line: Int
    let message: String
}

/// A parsed file: its pins, its books, and the lines that could not be read at all.
struct ImportPlan: Sendable {
    var pins: [ImportPin] = []
    var records: [ImportRecord] = []
    var errors: [ImportLineError] = []

    var total: Int { records.count + errors.count }
}

/// `GET /v1/me/imports/{id}`.
struct ImportView: Encodable, Sendable {
    struct Created: Encodable, Sendable {
        let books: Int
        let copies: Int
        let readings: Int
        let wishes: Int
    }

    let id: UUID
    let format: String
    let status: String
    let total: Int
    let done: Int
    let created: Created
    let skipped: Int
    let errors: [ImportLineError]
    let createdAt: Date
    let finishedAt: Date?

    enum CodingKeys: String, CodingKey {
        case id, format, status, total, done, created, skipped, errors, createdAt = "created_at", finishedAt = "finished_at"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.apiString, forKey: .id)
        try container.encode(format, forKey: .format)
        try container.encode(status, forKey: .status)
        try container.encode(total, forKey: .total)
        try container.encode(done, forKey: .done)
        try container.encode(created, forKey: .created)
        try container.encode(skipped, forKey: .skipped)
        try container.encode(errors, forKey: .errors)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(finishedAt, forKey: .finishedAt)
    }
}

/// What importing one record did.
struct ImportOutcome: Sendable {
    var books = 0
    var copies = 0
    var readings = 0
    var wishes = 0
    var errors: [ImportLineError] = []

    var createdNothing: Bool { books + copies + readings + wishes == 0 }
}
