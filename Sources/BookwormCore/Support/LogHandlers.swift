import Foundation
import Logging

/// The server's log handler: one line per event in either format (`BOOKWORM_LOG_FORMAT`), written
/// with one `write` call, so lines from many threads never interleave. Metadata is formatted
/// only when a line is written. swift-log's `StreamLogHandler` rebuilt its sorted metadata text
/// on every change, and every request changes it several times (request id, user id,
/// PostgresNIO's connection id per statement) although nearly nothing is logged: 3–4 % of the
/// server's CPU on a nearby page.
package struct LineLogHandler: LogHandler {
    package enum Format: Sendable {
        /// `time level label: key=value … [source] message`, `StreamLogHandler`'s layout.
        case text
        /// One JSON object (`JSONLogLine`).
        case json
    }

    package var metadata: Logger.Metadata = [:]
    package var logLevel: Logger.Level
    let label: String
    let format: Format
    let write: @Sendable (String) -> Void

    package init(label: String, level: Logger.Level, format: Format,
                 write: @escaping @Sendable (String) -> Void = LineLogHandler.standardError) {
        self.label = label
        self.logLevel = level
        self.format = format
        self.write = write
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        var fields = metadata
        if let explicit = event.metadata { fields.merge(explicit) { $1 } }
        // As `StreamLogHandler` names an error given to the logger.
        if let error = event.error {
            fields["error.message"] = "\(error)"
            fields["error.type"] = "\(String(reflecting: type(of: error)))"
        }
        switch format {
        case .text: write(TextLogLine.line(level: event.level, label: label, message: event.message, fields: fields, source: event.source))
        case .json: write(JSONLogLine.line(level: event.level, label: label, message: event.message, fields: fields))
        }
    }

    package static let standardError: @Sendable (String) -> Void = { line in
        FileHandle.standardError.write(Data(line.utf8))
    }
}

/// The human-readable line, laid out as swift-log's `StreamLogHandler` lays it out.
enum TextLogLine {
    static func line(level: Logger.Level, label: String, message: Logger.Message, fields: Logger.Metadata, source: String) -> String {
        let pretty = fields.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        return "\(timestamp()) \(level)\(label.isEmpty ? "" : " ")\(label):\(pretty.isEmpty ? "" : " " + pretty) [\(source)] \(message)\n"
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
