import Foundation
import Logging

/// The human-readable log line (`BOOKWORM_LOG_FORMAT=text`, the default), in swift-log's
/// `StreamLogHandler` layout: `time level label: key=value … [source] message`. Unlike that
/// handler, it formats metadata only when a line is written. `StreamLogHandler` rebuilt its
/// sorted metadata text on every change, and every request changes it several times (request
/// id, user id, PostgresNIO's connection id per statement) although nearly nothing is logged:
/// 3–4 % of the server's CPU on a nearby page. A line is written with one `write` call, so
/// lines from many threads never interleave.
package struct TextLogHandler: LogHandler {
    package var metadata: Logger.Metadata = [:]
    package var logLevel: Logger.Level
    let label: String
    let write: @Sendable (String) -> Void

    package init(label: String, level: Logger.Level, write: @escaping @Sendable (String) -> Void = JSONLogHandler.standardError) {
        self.label = label
        self.logLevel = level
        self.write = write
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(level: Logger.Level, message: Logger.Message, metadata explicit: Logger.Metadata?, source: String,
                     file: String, function: String, line: UInt) {
        var fields = metadata
        if let explicit { fields.merge(explicit) { $1 } }
        let pretty = fields.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        write("\(Self.timestamp()) \(level)\(label.isEmpty ? "" : " ")\(label):\(pretty.isEmpty ? "" : " " + pretty) [\(source)] \(message)\n")
    }

    /// Local time with its offset, as `StreamLogHandler` writes it.
    static func timestamp() -> String {
        var now = time(nil)
        var parts = tm()
        guard localtime_r(&now, &parts) != nil else { return "<unknown>" }
        var buffer = [CChar](repeating: 0, count: 64)
        let length = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &parts)
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
