import Foundation

package struct ConfigError: Error, CustomStringConvertible {
    let variable: String
    package let message: String
    package var description: String { "\(variable): \(message)" }

    package init(variable: String, message: String) {
        self.variable = variable
        self.message = message
    }
}

package struct EnvironmentReader {
    let env: [String: String]

    package init(env: [String: String]) {
        self.env = env
    }

    package func string(_ name: String) -> String? {
        guard let value = env[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        return value
    }

    package func int(_ name: String, range: ClosedRange<Int>) throws -> Int? {
        guard let raw = string(name) else { return nil }
        guard let value = Int(raw), range.contains(value) else {
            throw ConfigError(variable: name, message: "expected a whole number in \(range.lowerBound)...\(range.upperBound), got '\(raw)'")
        }
        return value
    }

    package func bool(_ name: String) throws -> Bool? {
        guard let raw = string(name)?.lowercased() else { return nil }
        switch raw {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default: throw ConfigError(variable: name, message: "expected true or false, got '\(raw)'")
        }
    }

    /// An absolute URL with one of `schemes`.
    package func url(_ name: String, schemes: Set<String>) throws -> String? {
        guard let raw = string(name) else { return nil }
        guard let url = URL(string: raw), let scheme = url.scheme?.lowercased(), schemes.contains(scheme), url.host != nil else {
            throw ConfigError(variable: name, message: "expected an \(schemes.sorted().joined(separator: " or ")) URL, got '\(raw)'")
        }
        return raw
    }
}
