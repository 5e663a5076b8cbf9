import Foundation
import Logging

/// One JSON object a line (`BOOKWORM_LOG_FORMAT=json`), for log shippers: `time` (UTC, ISO 8601
/// with milliseconds), `level`, `label`, `message`, then every metadata key at the top level.
/// Integers and decimals given as `.stringConvertible` are JSON numbers; nested metadata stays
/// nested. A line is written with one `write` call, so lines from many threads never interleave.
package struct JSONLogHandler: LogHandler {
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
        var text = "{\"time\":\(Self.quoted(Self.timestamp(Date()))),\"level\":\(Self.quoted(level.rawValue))"
        text += ",\"label\":\(Self.quoted(label)),\"message\":\(Self.quoted(message.description))"
        for key in fields.keys.sorted() where !["time", "level", "label", "message"].contains(key) {
            if let value = fields[key] { text += ",\(Self.quoted(key)):\(Self.json(value))" }
        }
        write(text + "}\n")
    }

    package static let standardError: @Sendable (String) -> Void = { line in
        FileHandle.standardError.write(Data(line.utf8))
    }

    static func timestamp(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    static func json(_ value: Logger.MetadataValue) -> String {
        switch value {
        case .string(let text):
            return quoted(text)
        case .stringConvertible(let convertible):
            switch convertible {
            case let number as any BinaryInteger: return "\(number)"
            case let number as Double where number.isFinite: return "\(number)"
            default: return quoted(convertible.description)
            }
        case .array(let values):
            return "[" + values.map(json).joined(separator: ",") + "]"
        case .dictionary(let values):
            return "{" + values.keys.sorted().compactMap { key in values[key].map { "\(quoted(key)):\(json($0))" } }
                .joined(separator: ",") + "}"
        }
    }

    /// A JSON string: quotes, backslashes and every control character escaped.
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F || (0x80..<0xA0).contains(scalar.value)
                || scalar.value == 0x2028 || scalar.value == 0x2029:
                out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
