import BookwormCore
import Catalog
import Discovery
import Foundation
import Logging
import Mail
import Places

// The server's own statements written out with literal parameters, for pgbench: what the
// benchmarks compare the HTTP service with. Nothing here ships in the server.

extension SQLValue {
    var literal: String {
        switch self {
        case .text(let value): value.map(Self.quote) ?? "NULL"
        case .textArray(let value): value.map { "ARRAY[" + $0.map(Self.quote).joined(separator: ",") + "]::text[]" } ?? "NULL"
        case .int(let value): value.map(String.init) ?? "NULL"
        // Shortest round-tripping text, so pgbench sees the very value the server binds.
        case .double(let value): value.map { "\($0)::float8" } ?? "NULL"
        case .uuid(let value): value.map { "'\($0.apiString)'::uuid" } ?? "NULL"
        case .uuidArray(let value): "ARRAY[" + value.map { "'\($0.apiString)'" }.joined(separator: ",") + "]::uuid[]"
        case .int64Array(let value): "ARRAY[" + value.map(String.init).joined(separator: ",") + "]::int8[]"
        case .bool(let value): value ? "true" : "false"
        }
    }

    private static func quote(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }
}

extension SQLValue {
    /// The value as a pgbench variable (`-D name=value`), which `-M prepared` binds as a
    /// parameter as the server does; nil for NULL, which pgbench cannot bind.
    var pgbenchVariable: String? {
        switch self {
        case .text(let value): value
        case .int(let value): value.map(String.init)
        case .double(let value): value.map { "\($0)" }
        case .uuid(let value): value?.apiString
        case .int64Array(let value): "{" + value.map(String.init).joined(separator: ",") + "}"
        case .bool(let value): value ? "true" : "false"
        case .textArray, .uuidArray: nil
        }
    }
}

extension SQLStatement {
    /// The statement for `pgbench -M prepared`: every value a variable `:pN` (so PostgreSQL
    /// plans it as it plans the server's, parameters unknown), NULLs written in as literals.
    var pgbenchScript: (sql: String, definitions: [String]) {
        var text = sql
        var definitions: [String] = []
        for (index, value) in values.enumerated().reversed() {
            if let variable = value.pgbenchVariable {
                text = text.replacingOccurrences(of: "$\(index + 1)", with: ":p\(index + 1)")
                definitions += ["-D", "p\(index + 1)=\(variable)"]
            } else {
                text = text.replacingOccurrences(of: "$\(index + 1)", with: value.literal)
            }
        }
        return (text, definitions)
    }

    /// The same statement with every placeholder replaced by its literal, highest first so
    /// `$1` never clobbers `$10`.
    var literalSQL: String {
        var text = sql
        for (index, value) in values.enumerated().reversed() {
            text = text.replacingOccurrences(of: "$\(index + 1)", with: value.literal)
        }
        return text
    }
}

/// What the catalog benchmark needs to compare the service with pgbench on the same SQL.
enum CatalogBenchmarkSQL {
    /// The library search the server runs for `GET /v1/copies?q=<query>&limit=<limit>`, with
    /// its parameters written in as literals: the statement the server chooses from the same
    /// statistics (`SearchFrequencies`), and which one it is.
    static func librarySearch(query: String, limit: Int, database: Database) async throws -> (sql: String, shape: LibrarySearchShape) {
        var filter = CopyFilter()
        filter.words = CatalogValidation.searchWords(query)
        guard let shape = await SearchFrequencies(clock: SystemClock()).shape(filter.words ?? [], limit: limit + 1, client: database,
                                                                              logger: Logger(label: "bench")) else {
            throw Shell.Failure(description: "copies have no statistics to choose a search's statement by (ANALYZE copies)")
        }
        return (CopiesStore.searchStatement(filter, limit: limit + 1, after: nil, shape: shape).literalSQL, shape)
    }
}

/// What the feed benchmark needs to compare the service with pgbench on the same SQL.
enum FeedBenchmarkSQL {
    /// The statement behind `GET /v1/posts?limit=<limit>` (first page), parameters as literals.
    static func globalFeed(limit: Int) -> String {
        PostsStore.listStatement(FeedFilter(), limit: limit + 1, after: nil).literalSQL
    }
}

extension FeedBenchmarkSQL {
    /// The global feed page after `cursor` (what `?cursor=` runs), parameters as literals.
    static func globalFeed(limit: Int, afterMicros micros: Int64, id: UUID) -> String {
        PostsStore.listStatement(FeedFilter(), limit: limit + 1, after: Cursor(micros: micros, id: id)).literalSQL
    }

    /// The same page by `OFFSET`, for comparison: what a cursor-less API would run.
    static func globalFeedByOffset(limit: Int, offset: Int) -> String {
        PostsStore.listStatement(FeedFilter(), limit: limit + 1, after: nil).literalSQL + " OFFSET \(offset)"
    }

    /// The nearby feed's first page around a point: the server's statement, and the statement
    /// it replaced (every pin in the radius, then their posts) as the reference.
    static func nearbyFeed(latitude: Double, longitude: Double, radiusKm: Double, limit: Int) -> (project: String, byPins: String) {
        var filter = FeedFilter()
        filter.near = NearbyArea(origin: GeoPoint(latitude: latitude, longitude: longitude), radiusKm: radiusKm)
        let project = PostsStore.listStatement(filter, limit: limit + 1, after: nil).literalSQL
        let byPins = PostsStore.nearbyByPinsStatement(filter, limit: limit + 1, after: nil)?.literalSQL ?? project
        return (project, byPins)
    }

    /// The transaction the server runs for the nearby feed's first page around a point (its grid
    /// read on the generic plan), for `pgbench -M prepared`; nil where the point takes no grid.
    /// JIT off, as the server's connections have it: a generic plan over 150 regions is
    /// estimated past `jit_above_cost`, and pgbench then spent 17 ms compiling a 1 ms read.
    static func nearbyFeedTransaction(latitude: Double, longitude: Double, radiusKm: Double, limit: Int, viewer: UUID)
        -> (script: String, definitions: [String])?
    {
        var filter = FeedFilter()
        filter.near = NearbyArea(origin: GeoPoint(latitude: latitude, longitude: longitude), radiusKm: radiusKm)
        filter.viewerID = viewer
        let plan = PostsStore.listPlan(filter, limit: limit + 1, after: nil)
        guard plan.grid != nil else { return nil }
        let (sql, definitions) = plan.statement.pgbenchScript
        return ("BEGIN;\n\(Database.genericPlanSetting);\nSET LOCAL jit = off;\n\(sql);\nCOMMIT;\n", definitions)
    }

    /// The keyset position a `next_cursor` stands for.
    static func decodeCursor(_ text: String) throws -> (micros: Int64, id: UUID) {
        let cursor = try Cursor(encoded: text)
        return (cursor.micros, cursor.id)
    }
}

/// Accepts everything and does nothing: for measuring the outbox itself.
struct DiscardingTransport: MailTransport, MailSession {
    init() {}
    func openSession() throws -> any MailSession { self }
    func send(_ message: OutgoingMessage) -> DeliveryOutcome { .sent }
    func close() {}
}

