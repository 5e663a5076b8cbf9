import BookwormCore
import Foundation
import Hummingbird

/// An HTML form's body (`application/x-www-form-urlencoded`), small and strict.
enum FormBody {
    static let limit = 16 * 1024

    static func fields(_ request: Request, context: AppRequestContext) async throws -> [String: String] {
        guard let type = request.headers[.contentType]?.lowercased(), type.hasPrefix("application/x-www-form-urlencoded") else {
            throw AppError.unsupportedMediaType("A form is sent as application/x-www-form-urlencoded")
        }
        let buffer = try await request.body.collect(upTo: limit)
        var fields: [String: String] = [:]
        for pair in String(buffer: buffer).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = decode(parts[0]) else { continue }
            fields[name] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return fields
    }

    static func decode(_ text: Substring) -> String? {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}
