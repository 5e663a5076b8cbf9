import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOConcurrencyHelpers
import Testing
@testable import BookwormCore
@testable import BookwormApp

/// `BOOKWORM_LOG_FORMAT=json`: one JSON object a line, for log shippers.
@Suite struct LogFormatTests {
    final class Lines: Sendable {
        let box = NIOLockedValueBox<[String]>([])
        func append(_ line: String) { box.withLockedValue { $0.append(line) } }
        var objects: [[String: Any]] {
            box.withLockedValue { $0 }.compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
            }
        }
        var raw: [String] { box.withLockedValue { $0 } }
    }

    @Test func eachEventIsOneParsableLineWithTimeLevelMessageAndMetadata() throws {
        let lines = Lines()
        var logger = Logger(label: "bookworm.test") { LineLogHandler(label: $0, level: .info, format: .json, write: lines.append) }
        logger[metadataKey: "instance"] = "api-1"
        logger.debug("below the level")
        logger.warning("odd \"input\"\nsecond line \u{7}", metadata: ["count": .stringConvertible(3), "ratio": .stringConvertible(0.5),
                                                                     "nested": ["a": "b"], "list": ["x", "y"]])
        #expect(lines.raw.count == 1)
        #expect(lines.raw.first?.hasSuffix("}\n") == true)
        #expect(lines.raw.first?.dropLast().contains("\n") == false)
        let object = try #require(lines.objects.first)
        #expect(object["level"] as? String == "warning")
        #expect(object["label"] as? String == "bookworm.test")
        #expect(object["message"] as? String == "odd \"input\"\nsecond line \u{7}")
        #expect(object["instance"] as? String == "api-1")
        #expect(object["count"] as? Int == 3 && object["ratio"] as? Double == 0.5)
        #expect((object["nested"] as? [String: Any])?["a"] as? String == "b")
        #expect(object["list"] as? [String] == ["x", "y"])
        let time = try #require(object["time"] as? String)
        #expect(try Date(time, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)).timeIntervalSinceNow.magnitude < 60)
    }

    @Test func theAccessLineNamesRequestIDRouteStatusAndDuration() async throws {
        let lines = Lines()
        let logger = Logger(label: "bookworm") { LineLogHandler(label: $0, level: .info, format: .json, write: lines.append) }
        let router = Router(context: AppRequestContext.self)
        router.add(middleware: RequestSetupMiddleware(maxBodyBytes: 1024, forwardedForHops: 0))
        router.add(middleware: AccessLogMiddleware(logger: logger))
        router.get("v1/things/:id") { _, _ in "thing" }
        let app = Application(router: router)
        try await app.test(.router) { client in
            let response = try await client.execute(uri: "/v1/things/42", method: .get, headers: [.init("X-Request-Id")!: "req-abc-123"])
            #expect(response.status == .ok)
        }
        let line = try #require(lines.objects.first { $0["message"] as? String == "request" })
        #expect(line["request_id"] as? String == "req-abc-123")
        #expect(line["route"] as? String == "/v1/things/{id}")
        #expect(line["path"] as? String == "/v1/things/42")
        #expect(line["status"] as? Int == 200)
        #expect((line["duration_ms"] as? Double).map { $0 >= 0 } == true)
    }

    /// A `TextOutputStream` for swift-log's own `StreamLogHandler`, to compare layouts with.
    struct Stream: TextOutputStream, Sendable {
        let lines: Lines
        mutating func write(_ string: String) { lines.append(string) }
    }

    @Test func aTextLineIsLaidOutAsSwiftLogsStreamHandlerLaysItOut() throws {
        let ours = Lines(), theirs = Lines()
        var loggers = [Logger(label: "bookworm.test") { LineLogHandler(label: $0, level: .info, format: .text, write: ours.append) },
                       Logger(label: "bookworm.test") { StreamLogHandler(label: $0, stream: Stream(lines: theirs), metadataProvider: nil) }]
        for index in loggers.indices {
            loggers[index][metadataKey: "b"] = "2"
            loggers[index][metadataKey: "a"] = "1"
            loggers[index].debug("below the level")
            loggers[index].warning("hello", metadata: ["c": .stringConvertible(3), "a": "override"])
            loggers[index][metadataKey: "a"] = nil
            loggers[index][metadataKey: "b"] = nil
            loggers[index].error("bare")
            loggers[index].error("failed", error: ConfigError(variable: "X", message: "broken"))
        }
        // Everything after the time (`2026-11-25T03:13:16+0000`), which is one line each.
        let tails = { (lines: Lines) in lines.raw.map { $0.drop { $0 != " " } } }
        #expect(tails(ours) == [" warning bookworm.test: a=override b=2 c=3 [BookwormCoreTests] hello\n",
                                " error bookworm.test: [BookwormCoreTests] bare\n",
                                " error bookworm.test: error.message=\(ConfigError(variable: "X", message: "broken")) "
                                + "error.type=BookwormCore.ConfigError [BookwormCoreTests] failed\n"])
        #expect(tails(ours) == tails(theirs))
        #expect(ours.raw.first?.prefix { $0 != " " }.count == "2026-11-25T03:13:16+0000".count)
    }

    @Test func anUnknownLogFormatStopsStartUpNamingTheVariable() throws {
        #expect(try Config.fromEnvironment(["BOOKWORM_LOG_FORMAT": "json"]).logFormat == .json)
        #expect(try Config.fromEnvironment([:]).logFormat == .text)
        #expect(throws: ConfigError.self) { try Config.fromEnvironment(["BOOKWORM_LOG_FORMAT": "xml"]) }
    }
}
