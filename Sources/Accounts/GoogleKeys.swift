import AsyncHTTPClient
import BookwormCore
import Foundation
import JWTKit
import Logging
import NIOHTTP1

/// Google's signing keys, fetched with async-http-client and kept for as long as the response's
/// `Cache-Control: max-age` says. A token naming a key id we do not hold triggers a fetch (keys
/// rotate), at most once per `refetchInterval`, so a stream of forged key ids cannot turn the
/// server into a hammer on Google.
actor GoogleKeySet {
    let url: String
    let refetchInterval: TimeInterval
    let fetchTimeout: TimeInterval
    let clock: any AppClock
    let logger: Logger
    private var keys = JWTKeyCollection()
    private var kids: Set<String> = []
    private var freshUntil = Date.distantPast
    private var lastFetch: Date?
    private var fetching: Task<Void, any Error>?

    init(url: String, refetchInterval: TimeInterval, fetchTimeout: TimeInterval, clock: any AppClock, logger: Logger) {
        self.url = url
        self.refetchInterval = refetchInterval
        self.fetchTimeout = fetchTimeout
        self.clock = clock
        self.logger = logger
    }

    /// The key collection when it holds `kid`; nil when the kid is unknown. The set is fetched
    /// when it is stale or does not hold the kid, but at most once per `refetchInterval`, even
    /// while Google is unreachable: meanwhile the keys already held keep verifying.
    func keys(for kid: String) async throws -> JWTKeyCollection? {
        let now = clock.now()
        let mayFetch = lastFetch.map { now.timeIntervalSince($0) >= refetchInterval } ?? true
        if let fetching {
            _ = try? await fetching.value
        } else if mayFetch && (now >= freshUntil || !kids.contains(kid)) {
            do {
                try await fetch()
            } catch where !kids.isEmpty {
                logger.warning("Google keys not refreshed", metadata: ["error": .string("\(error)")])
            }
        }
        guard !kids.isEmpty else { throw AppError.unavailable("Google's signing keys could not be fetched") }
        return kids.contains(kid) ? keys : nil
    }

    /// One fetch at a time: callers arriving meanwhile wait for it instead of starting another.
    private func fetch() async throws {
        if let fetching { return try await fetching.value }
        let task = Task { try await self.download() }
        fetching = task
        defer { fetching = nil }
        try await task.value
    }

    /// Any failure (network, HTTP status, a key that does not parse) is a 503: the server
    /// cannot check Google tokens right now, and the client may retry.
    private func download() async throws {
        do {
            try await replaceKeys()
        } catch let error as AppError {
            throw error
        } catch {
            logger.error("Google keys could not be fetched", metadata: ["error": .string("\(error)"), "url": .string(url)])
            throw AppError.unavailable("Google's signing keys could not be fetched")
        }
    }

    private func replaceKeys() async throws {
        lastFetch = clock.now()
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "Accept", value: "application/json")
        let response = try await HTTPClient.shared.execute(request, timeout: .milliseconds(Int64(fetchTimeout * 1000)))
        guard response.status == .ok else { throw AppError.unavailable("Google keys: HTTP \(response.status.code)") }
        let body = try await response.body.collect(upTo: 1 << 20)
        let jwks = try JSONDecoder().decode(JWKS.self, from: Data(buffer: body))
        let fresh = JWTKeyCollection()
        var fetched: Set<String> = []
        for jwk in jwks.keys {
            guard let kid = jwk.keyIdentifier?.string else { continue }
            try await fresh.add(jwk: jwk)
            fetched.insert(kid)
        }
        keys = fresh
        kids = fetched
        freshUntil = clock.now().addingTimeInterval(Self.maxAge(response.headers["Cache-Control"].first) ?? 300)
        logger.info("Google keys fetched", metadata: ["keys": .stringConvertible(fetched.count)])
    }

    /// `max-age` in seconds from a Cache-Control header; `no-store`/`no-cache` mean zero.
    static func maxAge(_ header: String?) -> TimeInterval? {
        guard let header else { return nil }
        for directive in header.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces).lowercased() }) {
            if directive == "no-store" || directive == "no-cache" { return 0 }
            if directive.hasPrefix("max-age="), let seconds = Double(directive.dropFirst(8)), seconds >= 0 {
                return min(seconds, 86_400)
            }
        }
        return nil
    }
}
