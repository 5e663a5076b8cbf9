import Foundation

/// Writes JSON straight into bytes for the pages clients fetch most (copies in the library and
/// nearby). Foundation's `JSONEncoder` spent half of a nearby request's CPU boxing every value
/// into a tree and sorting its keys. What this writes is byte for byte what `JSONEncoder.api`
/// writes for the same value (keys in sorted order, dates as ISO 8601 seconds in UTC, slashes
/// unescaped); `JSONWriterTests` holds every `JSONWritable` type to that.
///
/// It writes into memory of its own, grown by doubling, rather than an array: an array's append
/// checks its uniqueness and capacity and goes through a generic copy for every key, id and value,
/// a third of what writing a page cost (`make bench-json`: 43–46 against 31–32 µs for 50
/// copies). Being noncopyable, a writer cannot be copied and then freed twice; `bytes` and
/// `withBytes` read what it wrote.
package struct JSONWriter: ~Copyable {
    private var start: UnsafeMutablePointer<UInt8>
    private var count = 0
    private var capacity: Int
    var needsComma = false
    /// The last numbers written (bit pattern, and where their text lies in the output): a page's
    /// copies at one pin repeat its coordinates and distance, and formatting them anew was a
    /// tenth of writing a nearby page.
    private var recentNumbers = InlineArray<4, (bits: UInt64, offset: Int, length: Int)>(repeating: (0, 0, -1))
    private var nextRecent = 0

    package init(capacity: Int = 1024) {
        self.capacity = max(capacity, 64)
        start = UnsafeMutablePointer<UInt8>.allocate(capacity: self.capacity)
    }

    deinit { start.deallocate() }

    /// A copy of what was written.
    package var bytes: [UInt8] { Array(UnsafeBufferPointer(start: start, count: count)) }

    /// What was written, without a copy, for as long as `body` runs.
    package func withBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(UnsafeRawBufferPointer(start: start, count: count))
    }

    /// Room for `more` bytes after those written.
    private mutating func reserve(_ more: Int) {
        guard count + more > capacity else { return }
        let grown = max(capacity * 2, count + more)
        let moved = UnsafeMutablePointer<UInt8>.allocate(capacity: grown)
        moved.initialize(from: start, count: count)
        start.deallocate()
        start = moved
        capacity = grown
    }

    mutating func append(_ byte: UInt8) {
        reserve(1)
        start[count] = byte
        count += 1
    }

    mutating func append(_ raw: UnsafeRawBufferPointer) {
        guard let base = raw.baseAddress, !raw.isEmpty else { return }
        reserve(raw.count)
        UnsafeMutableRawPointer(start + count).copyMemory(from: base, byteCount: raw.count)
        count += raw.count
    }

    mutating func append(_ text: StaticString) {
        append(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    package mutating func object(_ body: (inout JSONWriter) throws -> Void) rethrows {
        separate()
        append(UInt8(ascii: "{"))
        needsComma = false
        try body(&self)
        append(UInt8(ascii: "}"))
        needsComma = true
    }

    mutating func array<Element>(_ elements: [Element], _ write: (inout JSONWriter, Element) throws -> Void) rethrows {
        separate()
        append(UInt8(ascii: "["))
        needsComma = false
        for element in elements { try write(&self, element) }
        append(UInt8(ascii: "]"))
        needsComma = true
    }

    /// A key inside an object; callers give keys in sorted order, as `.sortedKeys` would.
    package mutating func key(_ name: StaticString) {
        let count = name.utf8CodeUnitCount, comma = needsComma
        // One capacity check per key rather than five: keys are a third of a page's writes.
        chunk(count + 4) { out in
            var at = 0
            if comma { out[0] = UInt8(ascii: ","); at = 1 }
            out[at] = UInt8(ascii: "\"")
            for index in 0..<count { out[at + 1 + index] = name.utf8Start[index] }
            out[at + 1 + count] = UInt8(ascii: "\"")
            out[at + 2 + count] = UInt8(ascii: ":")
            return at + 3 + count
        }
        needsComma = false
    }

    package mutating func null() {
        separate()
        append("null")
        needsComma = true
    }

    package mutating func string(_ text: String?) {
        guard var text else { return null() }
        // Native strings are contiguous UTF-8, so this walks their bytes without decoding.
        text.withUTF8 { quoted(UnsafeRawBufferPointer($0)) }
    }

    /// `utf8` as a JSON string. Most text needs no escaping and is copied in one go.
    mutating func quoted(_ utf8: UnsafeRawBufferPointer) {
        separate()
        append(UInt8(ascii: "\""))
        if utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            for byte in utf8 { escape(byte) }
        } else {
            append(utf8)
        }
        append(UInt8(ascii: "\""))
        needsComma = true
    }

    package mutating func strings(_ texts: [String]) { array(texts) { $0.string($1) } }

    /// Lowercase, as `UUID.apiString`.
    package mutating func uuid(_ id: UUID?) {
        guard let id else { return null() }
        withUnsafeBytes(of: id.uuid) { uuid(bytes: $0) }
    }

    /// A UUID from its 16 bytes.
    mutating func uuid(bytes raw: UnsafeRawBufferPointer) {
        let comma = needsComma
        chunk(39) { out in
            var at = 0
            if comma { out[0] = UInt8(ascii: ","); at = 1 }
            out[at] = UInt8(ascii: "\"")
            at += 1
            for index in 0..<16 {
                if index == 4 || index == 6 || index == 8 || index == 10 { out[at] = UInt8(ascii: "-"); at += 1 }
                out[at] = Self.hexDigit(raw[index] >> 4)
                out[at + 1] = Self.hexDigit(raw[index] & 0x0f)
                at += 2
            }
            out[at] = UInt8(ascii: "\"")
            return at + 1
        }
        needsComma = true
    }

    /// Shortest round-tripping digits without a trailing ".0", as `JSONEncoder` writes them.
    /// Only finite values reach here (coordinates and distances).
    package mutating func number(_ number: Double) {
        guard number.isFinite else { return null() }
        separate()
        let bits = number.bitPattern
        for index in recentNumbers.indices where recentNumbers[index].bits == bits && recentNumbers[index].length >= 0 {
            let (_, offset, length) = recentNumbers[index]
            reserve(length)
            (start + count).update(from: start + offset, count: length)
            count += length
            needsComma = true
            return
        }
        let offset = count
        var text = number.description
        // The ".0" left off by its bytes: `hasSuffix` and `removeLast` compare and cut by
        // grapheme, a twentieth of writing a nearby page.
        text.withUTF8 { utf8 in
            let whole = utf8.count >= 2 && utf8[utf8.count - 2] == UInt8(ascii: ".") && utf8[utf8.count - 1] == UInt8(ascii: "0")
            append(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: utf8[..<(whole ? utf8.count - 2 : utf8.count)])))
        }
        recentNumbers[nextRecent] = (bits, offset, count - offset)
        nextRecent = (nextRecent + 1) % recentNumbers.count
        needsComma = true
    }

    /// Up to `maximum` bytes written by `fill` in place (it returns how many): one capacity
    /// check for a whole key, id or date.
    mutating func chunk(_ maximum: Int, _ fill: (UnsafeMutableBufferPointer<UInt8>) -> Int) {
        reserve(maximum)
        count += fill(UnsafeMutableBufferPointer(start: start + count, count: maximum))
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }

    mutating func separate() {
        if needsComma { append(UInt8(ascii: ",")) }
    }

    private mutating func escape(_ byte: UInt8) {
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): append(UInt8(ascii: "\\")); append(byte)
        case 0x08: append(UInt8(ascii: "\\")); append(UInt8(ascii: "b"))
        case 0x09: append(UInt8(ascii: "\\")); append(UInt8(ascii: "t"))
        case 0x0a: append(UInt8(ascii: "\\")); append(UInt8(ascii: "n"))
        case 0x0c: append(UInt8(ascii: "\\")); append(UInt8(ascii: "f"))
        case 0x0d: append(UInt8(ascii: "\\")); append(UInt8(ascii: "r"))
        case 0x00..<0x20:
            append("\\u00")
            append(Self.hexDigits[Int(byte >> 4)])
            append(Self.hexDigits[Int(byte & 0x0f)])
        default: append(byte)
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)
}

/// A response body type with a hand-written `JSONWriter` form; it must match its `Encodable` form.
package protocol JSONWritable {
    func write(to json: inout JSONWriter)
}

extension Page: JSONWritable where Item: JSONWritable {
    package func write(to json: inout JSONWriter) {
        json.object { json in
            json.key("data")
            json.array(data) { json, item in item.write(to: &json) }
            json.key("next_cursor")
            json.string(nextCursor)
        }
    }
}
