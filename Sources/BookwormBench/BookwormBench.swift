import ArgumentParser
import Foundation

@main
struct BookwormBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "BookwormBench",
        abstract: "Benchmarks that print the service's figures side by side with their reference.",
        subcommands: [Hashing.self, Catalog.self, NearbyCommand.self, FeedCommand.self, OutboxCommand.self, JSONCommand.self,
                      TradesCommand.self, ShelfCommand.self, PortabilityCommand.self, PhotosCommand.self, IdempotencyCommand.self, EventsCommand.self, PushCommand.self, GrowthCommand.self, RoundTripCommand.self, SummaryCommand.self]
    )
}

struct Hashing: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Argon2id raw rate vs login throughput over HTTP, /v1/me p99 idle and under a login storm, peak RSS.")

    @Option(help: "Seconds for each load phase.") var seconds = 20
    @Option(help: "Concurrent login clients.") var clients = 32
    @Option(help: "Port for the server under test.") var port = 18_080

    func run() async throws {
        try await HashingBenchmark(seconds: seconds, clients: clients, port: port).run()
    }
}

struct Catalog: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Library page 1 vs page 1000 latency; q-search throughput over HTTP vs pgbench on the same SQL.")

    @Option(help: "Users to seed.") var users = 100_000
    @Option(help: "Books to seed.") var books = 200_000
    @Option(help: "Copies to seed (only what is missing is added).") var copies = 1_000_000
    @Option(help: "Seconds for each load phase.") var seconds = 15
    @Option(help: "Concurrent clients for the search comparison.") var clients = 16
    @Option(help: "Port for the server under test.") var port = 18_080

    func run() async throws {
        try await CatalogBenchmark(users: users, books: books, copies: copies, seconds: seconds, clients: clients, port: port).run()
    }
}

struct NearbyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "nearby",
        abstract: "The nearby query vs PostGIS and a full scan (same ids), and its HTTP throughput vs pgbench.")

    @Option(help: "Query points, weighted to cities.") var points = 1000
    @Option(help: "Seconds for each load phase.") var seconds = 15
    @Option(help: "Concurrent clients for the throughput comparison.") var clients = 16
    @Option(help: "Port for the server under test.") var port = 18_080

    func run() async throws {
        try await NearbyBenchmark(points: points, seconds: seconds, clients: clients, port: port).run()
    }
}

struct FeedCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "feed",
        abstract: "Feed page 1 vs page 1000 (cursor, and OFFSET for comparison), nearby feed p50/p99, HTTP vs pgbench.")

    @Option(help: "Posts to seed over the existing users and pins (only what is missing is added).") var posts = 1_000_000
    @Option(help: "City-weighted points for the nearby feed.") var points = 1000
    @Option(help: "Seconds for each load phase.") var seconds = 15
    @Option(help: "Concurrent clients for the throughput comparison.") var clients = 16
    @Option(help: "Port for the server under test.") var port = 18_080

    func run() async throws {
        try await FeedBenchmark(posts: posts, points: points, seconds: seconds, clients: clients, port: port).run()
    }
}

struct OutboxCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outbox",
        abstract: "Outbox claim-and-complete throughput (no-op transport) and SMTP delivery vs Python smtplib, same aiosmtpd sink.")

    @Option(help: "Messages for the claim-and-complete phase.") var messages = 50_000
    @Option(help: "Messages for each SMTP phase.") var smtpMessages = 5_000
    @Option(help: "Concurrent workers.") var workers = 2
    @Option(help: "Port for the server under test.") var port = 18_080

    func run() async throws {
        try await OutboxBenchmark(messages: messages, smtpMessages: smtpMessages, workers: workers, port: port).run()
    }
}

struct JSONCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "json", abstract: "JSONWriter vs JSONEncoder on the same page of 50 copies (no server, no database).")

    @Option(help: "Pages per timed run.") var rounds = 2000

    func run() async throws {
        try JSONBenchmark(rounds: rounds).run()
    }
}

struct TradesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trades",
        abstract: "My trades page 1 vs 1000 (100k trades); request and accept under contention; request throughput vs pgbench.")

    @Option(help: "Incoming trades for the listing user (only what is missing is added).") var trades = 100_000
    @Option(help: "Concurrent clients requesting and accepting.") var clients = 32
    @Option(help: "Copies they all ask for.") var copies = 100
    @Option(help: "Seconds for each timed phase.") var seconds = 10
    @Option(help: "Port for the server under test.") var port = 18_080

    func run() async throws {
        try await TradesBenchmark(trades: trades, clients: clients, copies: copies, seconds: seconds, port: port).run()
    }
}

struct ShelfCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "shelf",
        abstract: "Matches p50/p99 (HTTP, and SQL vs the plain two-sided join); alert fan-out of a book wished by 10,000 users.")

    @Option(help: "Wishes to seed over the existing users (only what is missing is added).") var wishes = 500_000
    @Option(help: "Wishers of the popular book.") var wishers = 10_000
    @Option(help: "Runs of each matches query.") var runs = 200
    @Option(help: "Seconds for the HTTP phase.") var seconds = 10
    @Option(help: "Port for the server under test.") var port = 18_080

    func run() async throws {
        try await ShelfBenchmark(wishes: wishes, wishers: wishers, runs: runs, seconds: seconds, port: port).run()
    }
}

struct PortabilityCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "portability",
        abstract: "Full sync of 10,000 objects; the delta of 10 changes (SQL p50/p99); a 10,000-line Goodreads import and others' latency meanwhile.")

    @Option(help: "Copies the syncing user owns (only what is missing is added).") var objects = 10_000
    @Option(help: "Changes between the full sync and the delta.") var changes = 10
    @Option(help: "Runs of the delta statement.") var runs = 200
    @Option(help: "Lines of the Goodreads file.") var lines = 10_000
    @Option(help: "Port for the server under test.") var port = 18_080

    func run() async throws {
        try await PortabilityBenchmark(objects: objects, changes: changes, runs: runs, lines: lines, port: port).run()
    }
}

struct PhotosCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "photos",
        abstract: "12-megapixel JPEGs through PUT into six files each vs `vips thumbnail`; peak RSS of 8 uploads; others' p99 meanwhile.")

    @Option(help: "Pictures to upload (and to make with vips thumbnail).") var images = 48
    @Option(help: "Port for the server under test.") var port = 18_080

    func run() async throws {
        try await PhotosBenchmark(images: images, port: port).run()
    }
}

struct IdempotencyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "idempotency",
        abstract: "POST /v1/me/copies with an Idempotency-Key vs without (16 clients); a replay's p50 vs the original's.")

    @Option(help: "Seconds of each phase.") var seconds = 10
    @Option(help: "Concurrent clients, one account each.") var clients = 16
    @Option(help: "Rounds of the two phases, alternating.") var rounds = 3
    @Option(help: "Port for the server under test.") var port = 18_080

    func run() async throws {
        try await IdempotencyBenchmark(seconds: seconds, clients: clients, rounds: rounds, port: port).run()
    }
}

struct EventsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "Idle event streams (RSS, CPU); commit-to-event latency over two processes; a post fanned out to 1,000 live feeds.")

    @Option(help: "Idle streams on one process (five per account).") var streams = 10_000
    @Option(help: "Rounds of each latency phase.") var rounds = 20
    @Option(help: "Users in the latency phases, five streams each.") var users = 200
    @Option(help: "Port for the first server under test (the second takes the next).") var port = 18_080

    func run() async throws {
        try await EventsBenchmark(idleStreams: streams, rounds: rounds, port: port, users: users).run()
    }
}

struct PushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push", abstract: "One push worker sending 10,000 pushes to a fake APNs over HTTP/2, beside async-http-client alone.")

    @Option(help: "Pushes per round.") var pushes = 10_000
    @Option(help: "Rounds of each side, alternating.") var rounds = 3
    @Option(help: "Port for the server under test (it holds the database).") var port = 18_080

    func run() async throws {
        try await PushBenchmark(pushes: pushes, rounds: rounds, port: port).run()
    }
}

struct RoundTripCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "roundtrip", abstract: "What one trivial statement costs the Swift client at each layer, beside pgbench.")

    @Option(help: "Statements per layer.") var runs = 2000

    func run() async throws {
        try await RoundTripBenchmark(runs: runs).run()
    }
}
