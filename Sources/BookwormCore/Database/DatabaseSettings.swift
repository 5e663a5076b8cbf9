import Foundation
import Logging
import PostgresNIO

/// Where the database is: a `postgres://` URL from `DATABASE_URL`, or the embedded cluster's
/// socket. The password is kept out of `description` so it never reaches a log.
package struct DatabaseSettings: Sendable, CustomStringConvertible {
    package enum Endpoint: Sendable {
        case tcp(host: String, port: Int)
        case socket(path: String)
    }

    var endpoint: Endpoint
    package var username: String
    package var password: String?
    package var database: String
    var requireTLS: Bool

    package init(endpoint: Endpoint, username: String, password: String?, database: String, requireTLS: Bool = false) {
        self.endpoint = endpoint
        self.username = username
        self.password = password
        self.database = database
        self.requireTLS = requireTLS
    }

    /// `postgres://user:pass@host:port/db?sslmode=require`, or libpq's socket form
    /// `postgres://user@/db?host=/run/postgresql`.
    package init(url text: String) throws {
        guard let components = URLComponents(string: text),
              let scheme = components.scheme, ["postgres", "postgresql"].contains(scheme) else {
            throw ConfigError(variable: "DATABASE_URL", message: "expected postgres://user:password@host:port/database")
        }
        let query = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        let database = String(components.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty else {
            throw ConfigError(variable: "DATABASE_URL", message: "the URL names no database")
        }
        if let socketDir = query["host"], socketDir.hasPrefix("/") {
            let port = components.port ?? 5432
            endpoint = .socket(path: "\(socketDir)/.s.PGSQL.\(port)")
        } else {
            guard let host = components.host, !host.isEmpty else {
                throw ConfigError(variable: "DATABASE_URL", message: "the URL names no host")
            }
            endpoint = .tcp(host: host, port: components.port ?? 5432)
        }
        username = components.user?.removingPercentEncoding ?? "postgres"
        password = components.password?.removingPercentEncoding
        self.database = database.removingPercentEncoding ?? database
        let sslmode = query["sslmode"] ?? "prefer"
        requireTLS = ["require", "verify-ca", "verify-full"].contains(sslmode)
    }

    func withDatabase(_ name: String) -> DatabaseSettings {
        var copy = self
        copy.database = name
        return copy
    }

    /// The URL form, password included: for handing to a child configuration, never for logs.
    var connectionURL: String {
        let user = username.addingPercentEncoding(withAllowedCharacters: .urlUserAllowed) ?? username
        let secret = password.flatMap { $0.addingPercentEncoding(withAllowedCharacters: .urlPasswordAllowed) }.map { ":\($0)" } ?? ""
        switch endpoint {
        case .tcp(let host, let port):
            return "postgres://\(user)\(secret)@\(host):\(port)/\(database)" + (requireTLS ? "?sslmode=require" : "")
        case .socket(let path):
            let directory = (path as NSString).deletingLastPathComponent
            let port = path.split(separator: ".").last.flatMap { Int($0) } ?? 5432
            return "postgres://\(user)\(secret)@localhost:\(port)/\(database)?host=\(directory)"
        }
    }

    package var description: String {
        switch endpoint {
        case .tcp(let host, let port): "postgres://\(username)@\(host):\(port)/\(database)"
        case .socket(let path): "postgres://\(username)@/\(database)?socket=\(path)"
        }
    }

    /// `statementTimeout` marks the app's own pools: it becomes the server's `statement_timeout` on
    /// every pooled connection, and JIT compilation is off there. The app runs short statements,
    /// and PostgreSQL compiles any whose estimated cost passes `jit_above_cost`: a generic plan's
    /// estimate (a `LIMIT $n` taken for a tenth of the rows) passed it at 5,000,000 posts, and a
    /// 1 ms nearby feed read spent 45 ms compiling. Admin clients (migrations) leave both alone.
    /// `asynchronousCommit` is for the outbox worker's own pool: its bookkeeping (claim, renew,
    /// mark sent) does not wait for the WAL flush, so a message costs no disk sync. Only a crash
    /// of PostgreSQL itself can then lose the last few milliseconds of it: a claim or renewal
    /// (harmless) or a "sent" (that message goes out again), never anything a user wrote.
    /// `genericPlans` is for the pool of `Database.executeOnGenericPlan` (`GenericPlanPool`).
    /// `idleTimeout` closes a connection left idle that long (the app's: `BOOKWORM_DB_IDLE_SECONDS`).
    package func clientConfiguration(poolSize: Int, statementTimeout: Duration? = nil,
                                     asynchronousCommit: Bool = false, genericPlans: Bool = false,
                                     idleTimeout: Duration = defaultIdleTimeout) -> PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        switch endpoint {
        case .tcp(let host, let port):
            let tls: PostgresClient.Configuration.TLS
            if requireTLS {
                tls = .require(.makeClientConfiguration())
            } else if !Self.isLoopback(host) {
                tls = .prefer(.makeClientConfiguration())
            } else {
                tls = .disable
            }
            configuration = .init(host: host, port: port, username: username, password: password, database: database, tls: tls)
        case .socket(let path):
            configuration = .init(unixSocketPath: path, username: username, password: password, database: database)
        }
        configuration.options.maximumConnections = poolSize
        configuration.options.minimumConnections = 0
        // No keep-alive pings: PostgresNIO arms a keep-alive timer for every connection it parks,
        // a task group of two tasks and a Dispatch timer, and cancels it at the next lease, so
        // each query paid for one. The idle timer costs the same, and a cancelled Task.sleep keeps
        // its memory, about 0.75 KiB, until its deadline (swiftlang/swift#60441): with the default
        // minute, a process that had just opened 10,000 event streams (a statement each) held
        // 0.6 KiB a stream of them, and their firing doubled its idle CPU. Ten seconds bounds that
        // garbage to ten seconds of queries by default (`BOOKWORM_DB_IDLE_SECONDS`); a connection
        // idle that long is closed, and the next lease opens one (milliseconds on a local socket,
        // a TLS handshake more across a network: hence the setting). No longer than a NAT or load
        // balancer keeps a silent flow (often 300 s): with no pings, a dropped connection would
        // be handed out and its statement would wait for its deadline.
        // Only a minimum of connections would avoid the timer, and PostgresNIO 1.33 crashes on one
        // while the database is down (`OutageTests` caught it twice, once under a full `make test`).
        configuration.options.keepAliveBehavior = nil
        configuration.options.connectionIdleTimeout = idleTimeout
        if let statementTimeout {
            let milliseconds = DatabaseDeadlines(statement: statementTimeout).statementTimeoutMilliseconds
            configuration.options.additionalStartupParameters.append(("statement_timeout", "\(milliseconds)"))
            configuration.options.additionalStartupParameters.append(("jit", "off"))
        }
        if asynchronousCommit {
            configuration.options.additionalStartupParameters.append(("synchronous_commit", "off"))
        }
        if genericPlans {
            configuration.options.additionalStartupParameters.append(("plan_cache_mode", "force_generic_plan"))
        }
        return configuration
    }

    /// See `clientConfiguration`; the app's is `BOOKWORM_DB_IDLE_SECONDS`.
    package static let defaultIdleTimeout: Duration = .seconds(10)

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// A client for short admin work (migrations, creating databases) outside the app's pool,
    /// run through `whileRunning`. Its first lease always races `run()` starting in a sibling
    /// task, and PostgresNIO warns about that race though the lease just waits; so its own
    /// background log keeps errors only (a failed query still throws to the caller).
    package func makeClient(poolSize: Int = 4, logger: Logger) -> PostgresClient {
        var background = logger
        background.logLevel = max(logger.logLevel, .error)
        return PostgresClient(configuration: clientConfiguration(poolSize: poolSize), backgroundLogger: background)
    }
}

extension PostgresClient {
    /// Runs `body` with a running client, then shuts it down: for CLI commands and tests.
    package func whileRunning<T: Sendable>(_ body: @Sendable (PostgresClient) async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await self.run() }
            do {
                let result = try await body(self)
                group.cancelAll()
                return result
            } catch {
                group.cancelAll()
                throw error
            }
        }
    }

    /// On `connection` when the caller is inside its own transaction, else on a pooled one.
    @discardableResult
    package func query(_ query: PostgresQuery, on connection: PostgresConnection?, logger: Logger) async throws -> PostgresRowSequence {
        if let connection { return try await connection.query(query, logger: logger) }
        return try await self.query(query, logger: logger)
    }

    /// `withTransaction` that lets the closure's own error through unwrapped, so an `AppError`
    /// thrown inside a transaction still reaches the client as itself.
    package func transaction<T: Sendable>(logger: Logger, _ body: (PostgresConnection) async throws -> T) async throws -> T {
        do {
            return try await withTransaction(logger: logger) { connection in try await body(connection) }
        } catch let error as PostgresTransactionError {
            if let inner = error.closureError { throw inner }
            throw error
        }
    }
}

extension PSQLError {
    /// The server's own message (the default description hides it on purpose).
    var serverMessage: String {
        if let message = serverInfo?[.message] {
            let detail = serverInfo?[.detail].map { " (\($0))" } ?? ""
            return message + detail
        }
        return String(reflecting: self)
    }

    package var sqlState: String? { serverInfo?[.sqlState] }
}
