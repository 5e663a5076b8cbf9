import Foundation
import Logging

/// One JSON object a line (`BOOKWORM_LOG_FORMAT=json`), for log shippers: `time` (UTC, ISO 8601
/// with milliseconds), `level`, `label`, `message`, then every metadata key at the top level.
/// Integers and decimals given as `.stringConvertible` are JSON numbers; nested metadata stays
/// nested.
enum JSONLogLine {
    static func line(level: Logger.Level, label: String, message: Logger.Message, fields: Logger.Metadata) -> String {
        var text = "{\"time\":\(quoted(timestamp(Date()))),\"level\":\(quoted(level.rawValue))"
        text += ",\"label\":\(quoted(label)),\"message\":\(quoted(message.description))"
        for key in fields.keys.sorted() where !["time", "level", "label", "message"].contains(key) {
            if let value = fields[key] { text += ",\(quoted(key)):\(json(value))" }
        }
        return text + "}\n"
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
