import AsyncHTTPClient
import BookwormCore
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import ServiceLifecycle

/// What became of one push.
enum PushResult: Sendable, Equatable {
    case sent
    /// The provider says the device no longer exists: it is deleted.
    case gone
    /// A 4xx other than those: never retried.
    case rejected(String)
    /// 429, 5xx or no answer: tried again after `after` (the provider's `Retry-After`) or backoff.
    case retry(after: TimeInterval?, reason: String)
    /// This worker has no settings for the push's provider: tried again after `PushTransport.notHereDelay`.
    case unconfigured(String)

    var metricResult: String {
        switch self {
        case .sent: "sent"
        case .gone: "gone"
        case .rejected: "rejected"
        case .retry: "retried"
        case .unconfigured: "unconfigured"
        }
    }
}

/// The HTTP client pushes go out on (HTTP/2 over TLS: one connection per provider carries a
/// batch at once) and the configured providers. A service, so the client shuts down after the
/// runner that uses it has stopped.
package final class PushTransport: Service, Sendable {
    let http: HTTPClient
    let apns: APNsSender?
    let fcm: FCMSender?
    let timeout: TimeAmount

    package init(settings: PushSettings, clock: any AppClock, logger: Logger) throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile = settings.caFile { tls.additionalTrustRoots = [.file(caFile)] }
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls, timeout: .init(connect: .seconds(Int64(settings.timeoutSeconds))))
        configuration.httpVersion = .automatic
        let http = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration, backgroundActivityLogger: logger)
        let timeout = TimeAmount.seconds(Int64(settings.timeoutSeconds))
        do {
            fcm = try settings.fcm.map { try FCMSender(settings: $0, clock: clock, http: http, timeout: timeout) }
        } catch {
            try? http.syncShutdown()
            throw error
        }
        self.http = http
        self.timeout = timeout
        apns = settings.apns.map { APNsSender(settings: $0, clock: clock) }
    }

    package func run() async throws {
        try? await gracefulShutdown()
        try await shutdown()
    }

    package func shutdown() async throws {
        try await http.shutdown()
    }

    /// Provider tokens made so far: APNs, FCM.
    package func tokensMade() async -> (apns: Int, fcm: Int) {
        (await apns?.tokens.made ?? 0, await fcm?.tokens.made ?? 0)
    }

    func send(_ push: PushJob, to device: PushJob.Device) async -> PushResult {
        switch push.provider {
        case "apns": await apns?.send(push, to: device, http: http, timeout: timeout) ?? Self.notHere("APNs")
        case "fcm": await fcm?.send(push, to: device, http: http, timeout: timeout) ?? Self.notHere("FCM")
        default: .rejected("unknown provider \(push.provider)")
        }
    }

    /// A provider this worker has no settings for. The API process that queued the push has
    /// them, and so may another worker (or this one once restarted with them): the push waits
    /// for it, within its tries, instead of being dropped.
    static func notHere(_ provider: String) -> PushResult {
        .unconfigured("\(provider) is not configured on this worker")
    }

    static let notHereDelay: TimeInterval = 600
}

enum PushHTTP {
    /// An answer is small; more than this is not a provider's.
    static let answerLimit = 64 * 1024

    /// What a provider's error answer means.
    enum Verdict {
        case result(PushResult)
        /// The provider calls the token stale: renew it and send once more.
        case staleToken
    }

    /// Sends `request` with the provider's current token (`scheme token`); a token the provider
    /// calls stale is renewed (one signing however many ask) and the request sent once more.
    /// Only an error answer is read, by `judge`.
    static func send(_ request: HTTPClientRequest, scheme: String, tokens: ProviderToken, http: HTTPClient, timeout: TimeAmount,
                     judge: (_ status: Int, _ headers: HTTPHeaders, _ answer: Data) -> Verdict) async -> PushResult {
        var request = request
        do {
            var token = try await tokens.token()
            for attempt in 0..<2 {
                request.headers.replaceOrAdd(name: "authorization", value: "\(scheme) \(token)")
                let (status, headers, answer) = try await execute(request, http: http, timeout: timeout)
                if status == 200 { return .sent }
                switch judge(status, headers, answer) {
                case .result(let result): return result
                case .staleToken where attempt == 0: token = try await tokens.renew(replacing: token)
                case .staleToken: return .retry(after: nil, reason: "a fresh token was refused too")
                }
            }
            return .retry(after: nil, reason: "the token was refused twice")
        } catch {
            return .retry(after: nil, reason: "no answer: \(error)")
        }
    }

    static func execute(_ request: HTTPClientRequest, http: HTTPClient, timeout: TimeAmount) async throws -> (Int, HTTPHeaders, Data) {
        let response = try await http.execute(request, timeout: timeout)
        let body = try await response.body.collect(upTo: answerLimit)
        return (Int(response.status.code), response.headers, Data(body.readableBytesView))
    }

    /// 429 and 5xx are tried again (after the provider's `Retry-After` when it gives one); any
    /// other 4xx is the push's own fault and never is.
    static func classify(status: Int, headers: HTTPHeaders, reason: String, now: Date) -> PushResult {
        let why = "\(status)\(reason.isEmpty ? "" : " \(reason)")"
        guard status == 429 || status >= 500 else { return .rejected(why) }
        return .retry(after: headers.first(name: "retry-after").flatMap { retryAfter($0, now: now) }, reason: why)
    }

    /// Seconds, or an HTTP date (read against the app's clock).
    static func retryAfter(_ value: String, now: Date) -> TimeInterval? {
        if let seconds = Double(value.trimmingCharacters(in: .whitespaces)), seconds >= 0 { return min(seconds, 86400) }
        let format = DateFormatter()
        format.locale = Locale(identifier: "en_US_POSIX")
        format.timeZone = TimeZone(identifier: "GMT")
        format.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return format.date(from: value).map { min(max(0, $0.timeIntervalSince(now)), 86400) }
    }
}

extension PushJob {
    /// `{"id", "kind"}`: what every push carries for the app to open (API.md), under `data` on
    /// both providers.
    func writeData(to json: inout JSONWriter) {
        json.object { data in
            data.key("id")
            data.string(objectID)
            data.key("kind")
            data.string(kind)
        }
    }

    /// `{"body", "title"}`: the alert, as both providers name its fields.
    func writeAlert(to json: inout JSONWriter) {
        json.object { alert in
            alert.key("body")
            alert.string(body)
            alert.key("title")
            alert.string(title)
        }
    }
}
