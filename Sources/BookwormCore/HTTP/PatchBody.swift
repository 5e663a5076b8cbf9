import Foundation

/// A `PATCH` payload. A key left out leaves its value alone; a `null` means what the OpenAPI
/// document says it means. The keys in `nullableKeys` are nullable there, with a description
/// saying what null does (mostly: clears the value), and the body decodes them itself, usually
/// as a `FieldUpdate`. For every other key the schema forbids null, so `decodeStrict` refuses
/// it with a 400 naming the field before the body is decoded. A new field is safe by default:
/// decoded as an `Optional`, a null would otherwise read as "left out" and be silently ignored.
package protocol PatchBody: StrictBody {
    static var nullableKeys: [CodingKeys] { get }
}

extension PatchBody {
    /// The keys of `object` holding a null the schema does not allow, as field errors.
    static func refusedNulls(in object: [String: Any]) -> [FieldError] {
        let nullable = Set(nullableKeys.map(\.stringValue))
        return object.filter { $0.value is NSNull && !nullable.contains($0.key) }.keys.sorted()
            .map { FieldError($0, "must not be null") }
    }
}

/// One field of a body that tells a key left out (`unchanged`) from a `null` (`set(nil)`).
package enum FieldUpdate<Value: Decodable & Sendable>: Sendable {
    case unchanged
    case set(Value?)

    package init<K: CodingKey>(_ container: KeyedDecodingContainer<K>, _ key: K) throws {
        guard container.contains(key) else {
            self = .unchanged
            return
        }
        self = try container.decodeNil(forKey: key) ? .set(nil) : .set(container.decode(Value.self, forKey: key))
    }

    /// (whether to set, the value to set) for SQL's `CASE WHEN $set THEN $value ELSE column END`.
    package var parts: (set: Bool, value: Value?) {
        switch self {
        case .unchanged: (false, nil)
        case .set(let value): (true, value)
        }
    }
}
