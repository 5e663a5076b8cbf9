import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

extension JSONEncoder {
    /// The API's one encoder: RFC 3339 UTC times, stable key order (so ETags are stable).
    package static var api: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}

/// A write payload whose accepted keys are exactly its `CodingKeys`: anything else is a 400,
/// so a client can never mass-assign a column it was not meant to touch.
package protocol StrictBody: Decodable {
    associatedtype CodingKeys: CodingKey & CaseIterable
}

extension Request {
    /// Reads and decodes a JSON object body with the API's rules: JSON media type (415),
    /// size limit (413), syntax errors that say where (400), unknown fields (400), and
    /// type/missing-field errors naming the field (400).
    package mutating func decodeStrict<T: StrictBody>(_ type: T.Type, context: AppRequestContext) async throws -> T {
        try requireJSONMediaType()
        let data = LoneSurrogates.repaired(try await collectLimitedBody(limit: context.maxBodyBytes))
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data, options: [])
        } catch {
            throw AppError.malformedBody("The body is not valid JSON: \(JSONErrorText.describe(error))")
        }
        guard let dictionary = object as? [String: Any] else {
            throw AppError.malformedBody("The body must be a JSON object")
        }
        let allowed = Set(T.CodingKeys.allCases.map(\.stringValue))
        let unknown = dictionary.keys.filter { !allowed.contains($0) }.sorted()
        if !unknown.isEmpty {
            throw AppError.validation(unknown.map { FieldError($0, "unknown field") })
        }
        if let patch = T.self as? any PatchBody.Type {
            let nulls = patch.refusedNulls(in: dictionary)
            if !nulls.isEmpty { throw AppError.validation(nulls) }
        }
        if let field = InputSanity.firstNULPath(in: dictionary) {
            throw AppError.invalid(field, InputSanity.nulMessage)
        }
        do {
            return try JSONDecoder().decode(T.self, from: data)
        } catch let error as DecodingError {
            throw AppError.validation([JSONErrorText.fieldError(error)])
        }
    }

    /// The body, at most `limit` bytes (413 past it, from `Content-Length` or as it is read), each
    /// quarter MiB paid to `pace` before more is read (the client waits in TCP). The body is consumed.
    package func collectLimitedBody(limit: Int, pace: UploadPace? = nil) async throws -> Data {
        if let length = headers[.contentLength].flatMap(Int.init), length > limit {
            throw AppError.payloadTooLarge(limit: limit)
        }
        var collected = Data(), tab = UploadPace.Tab(pace)
        for try await chunk in body {
            guard collected.count + chunk.readableBytes <= limit else { throw AppError.payloadTooLarge(limit: limit) }
            collected.append(contentsOf: chunk.readableBytesView)
            try await tab.add(chunk.readableBytes)
        }
        try await tab.settle()
        return collected
    }

    func requireJSONMediaType() throws {
        guard let raw = headers[.contentType] else {
            throw AppError.unsupportedMediaType("Content-Type must be application/json")
        }
        let essence = raw.split(separator: ";", maxSplits: 1)[0].trimmingCharacters(in: .whitespaces).lowercased()
        guard essence == "application/json" else {
            throw AppError.unsupportedMediaType("Content-Type must be application/json, not \(essence)")
        }
    }
}

enum JSONErrorText {
    static func describe(_ error: any Error) -> String {
        let nsError = error as NSError
        if let debug = nsError.userInfo[NSDebugDescriptionErrorKey] as? String { return debug }
        return nsError.localizedDescription
    }

    static func fieldError(_ error: DecodingError) -> FieldError {
        switch error {
        case .keyNotFound(let key, let context):
            return FieldError(path(context.codingPath + [key]), "is required")
        case .typeMismatch(let type, let context):
            return FieldError(path(context.codingPath), "must be \(typeName(type))")
        case .valueNotFound(let type, let context):
            return FieldError(path(context.codingPath), "must be \(typeName(type)), not null")
        case .dataCorrupted(let context):
            return FieldError(path(context.codingPath), context.debugDescription)
        @unknown default:
            return FieldError("body", "could not be decoded")
        }
    }

    private static func path(_ keys: [any CodingKey]) -> String {
        let text = keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
        return text.isEmpty ? "body" : text.replacingOccurrences(of: ".[", with: "[")
    }

    private static func typeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "a boolean"
        case is Int.Type, is Double.Type: "a number"
        default: "a \(type)"
        }
    }
}

/// JSON's grammar allows a `\uD800`–`\uDFFF` escape with no partner, but no Swift string can
/// hold one and Foundation refuses the whole document. Such an escape is read as U+FFFD, as
/// most JSON readers do, so the field arrives and its own rules judge it.
enum LoneSurrogates {
    static func repaired(_ data: Data) -> Data {
        let bytes = [UInt8](data)
        guard bytes.count >= 6, bytes.contains(UInt8(ascii: "\\")) else { return data }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\\"), index + 1 < bytes.count {
                if bytes[index + 1] == UInt8(ascii: "u"), let unit = unit(bytes, at: index), (0xD800...0xDFFF).contains(unit) {
                    let next = unit <= 0xDBFF ? Self.unit(bytes, at: index + 6) : nil
                    if let next, (0xDC00...0xDFFF).contains(next) {
                        output += bytes[index..<index + 12]
                        index += 12
                    } else {
                        output += Array("\\ufffd".utf8)
                        index += 6
                    }
                    continue
                }
                output += bytes[index...index + 1]
                index += 2
                continue
            }
            output.append(byte)
            index += 1
        }
        return Data(output)
    }

    /// The code unit of a `\uXXXX` escape starting at `start`.
    private static func unit(_ bytes: [UInt8], at start: Int) -> UInt32? {
        guard start + 6 <= bytes.count, bytes[start] == UInt8(ascii: "\\"), bytes[start + 1] == UInt8(ascii: "u") else { return nil }
        return UInt32(String(decoding: bytes[start + 2..<start + 6], as: UTF8.self), radix: 16)
    }
}
