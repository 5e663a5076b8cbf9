import ArgumentParser
import Foundation

@main
struct BookwormBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "BookwormBench",
        abstract: "Benchmarks that print the service's figures side by side with their reference.",
        subcommands: [Hashing.self]
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
