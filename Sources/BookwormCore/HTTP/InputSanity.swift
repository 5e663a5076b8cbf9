import Foundation
import HTTPTypes
import Hummingbird

/// PostgreSQL refuses NUL in text and every store assumes valid UTF-8, so a string that breaks
/// either must stop at the edge as a 400 naming where it came from, not deep in a query as a 500.
/// This middleware covers the path, the query and the headers; `decodeStrict` covers JSON bodies
/// with `InputSanity.firstBadString(in:)`.
package struct InputSanityMiddleware: RouterMiddleware {
    package typealias Context = AppRequestContext

    package init() {}

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let problem = InputSanity.check(path: request.uri.path, query: request.uri.query, headers: request.headers) {
            throw AppError.validation([problem])
        }
        return try await next(request, context)
    }
}

package enum InputSanity {
    static let nulMessage = "must not contain NUL characters"
    static let utf8Message = "must be valid UTF-8"

    static func check(path: String, query: String?, headers: HTTPFields) -> FieldError? {
        for segment in path.split(separator: "/") {
            if let message = problem(inPercentEncoded: segment, plusIsSpace: false) {
                return FieldError("path", message)
            }
        }
        if let query, !isPlain(query) {
            if let problem = queryProblem(query) { return problem }
        }
        for field in headers where field.value.utf8.contains(0) {
            return FieldError("header.\(field.name.canonicalName)", nulMessage)
        }
        return nil
    }

    /// Whether a query has nothing `queryProblem` could find, decided without a copy: no escape,
    /// no `+`, no NUL, at most 16 parameters and no name twice. Splitting, decoding and hashing
    /// every name of every request to learn that was 2 % of a nearby request's CPU; a query
    /// this cannot clear goes through `queryProblem`, which names what is wrong.
    static func isPlain(_ query: String) -> Bool {
        var query = query
        return query.withUTF8 { bytes in
            var names = InlineArray<16, (start: Int, end: Int)>(repeating: (0, 0))
            var count = 0, start = 0, nameEnd: Int?
            for index in 0...bytes.count {
                let byte = index < bytes.count ? bytes[index] : UInt8(ascii: "&")
                switch byte {
                case UInt8(ascii: "%"), UInt8(ascii: "+"), 0:
                    return false
                case UInt8(ascii: "="):
                    if nameEnd == nil { nameEnd = index }
                case UInt8(ascii: "&"):
                    defer { start = index + 1; nameEnd = nil }
                    guard index > start else { continue }
                    guard count < names.count else { return false }
                    let name = (start, nameEnd ?? index)
                    for earlier in 0..<count where same(bytes, names[earlier], name) { return false }
                    names[count] = name
                    count += 1
                default:
                    continue
                }
            }
            return true
        }
    }

    private static func same(_ bytes: UnsafeBufferPointer<UInt8>, _ a: (start: Int, end: Int), _ b: (start: Int, end: Int)) -> Bool {
        a.end - a.start == b.end - b.start && bytes[a.start..<a.end].elementsEqual(bytes[b.start..<b.end])
    }

    static func queryProblem(_ query: String) -> FieldError? {
        var seen: Set<String> = []
        for item in query.split(separator: "&") {
            let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let rawName = parts[0]
            let name = Request.formDecoded(rawName)
            // Named only when something is wrong: most requests have nothing to report.
            // An empty name or one holding NUL cannot be named; the query as a whole is.
            var field: String { name.map { $0.isEmpty || $0.contains("\0") ? "query" : "query.\($0)" } ?? "query" }
            if let message = problem(inPercentEncoded: rawName, plusIsSpace: true) {
                return FieldError(field, message)
            }
            if parts.count > 1, let message = problem(inPercentEncoded: parts[1], plusIsSpace: true) {
                return FieldError(field, message)
            }
            // Every parameter is single-valued: a repeat is ambiguous, not "the first one wins".
            if let name, !seen.insert(name).inserted {
                return FieldError(field, "must be given once")
            }
        }
        return nil
    }

    /// Walks a parsed JSON value for a string (or key) holding NUL; returns its path, e.g. `notes[2]`.
    package static func firstNULPath(in value: Any, path: String = "") -> String? {
        switch value {
        case let string as String:
            return string.contains("\0") ? (path.isEmpty ? "body" : path) : nil
        case let array as [Any]:
            for (index, element) in array.enumerated() {
                if let found = firstNULPath(in: element, path: "\(path)[\(index)]") { return found }
            }
        case let object as [String: Any]:
            for key in object.keys.sorted() {
                let childPath = path.isEmpty ? key : "\(path).\(key)"
                if key.contains("\0") { return path.isEmpty ? "body" : path }
                if let child = object[key], let found = firstNULPath(in: child, path: childPath) { return found }
            }
        default:
            break
        }
        return nil
    }

    private static func problem(inPercentEncoded text: Substring, plusIsSpace: Bool) -> String? {
        // Without escapes the bytes are the string's own, valid UTF-8 already: only NUL to look
        // for, without decoding a copy (every parameter of every request comes through here).
        if !text.utf8.contains(UInt8(ascii: "%")) { return text.utf8.contains(0) ? nulMessage : nil }
        guard let bytes = percentDecoded(text, plusIsSpace: plusIsSpace) else { return "has a malformed percent escape" }
        if bytes.contains(0) { return nulMessage }
        if String(validating: bytes, as: UTF8.self) == nil { return utf8Message }
        return nil
    }

    static func percentDecoded(_ text: Substring, plusIsSpace: Bool) -> [UInt8]? {
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
                output.append(high << 4 | low)
            case UInt8(ascii: "+") where plusIsSpace:
                output.append(UInt8(ascii: " "))
            default:
                output.append(byte)
            }
        }
        return output
    }

    /// A hex digit's value, in either case.
    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
