import Foundation

/// libvips 8.14.1's webpsave writes an EXIF chunk of its own (orientation, resolution) even with
/// `strip` and with no metadata on the image; `LibvipsWorkaroundTests` notices when it stops.
/// The chunks that carry metadata are taken out of the RIFF container, and their VP8X flags cleared.
enum WebPContainer {
    static let metadataChunks: Set<String> = ["EXIF", "XMP ", "ICCP"]

    /// `data` without EXIF, XMP and ICC chunks; unchanged when it is not a RIFF WebP.
    static func withoutMetadata(_ data: Data) -> Data {
        let bytes = [UInt8](data)
        guard bytes.count >= 12, bytes[0..<4] == [0x52, 0x49, 0x46, 0x46], bytes[8..<12] == [0x57, 0x45, 0x42, 0x50] else { return data }
        var body: [UInt8] = [], at = 12
        while at + 8 <= bytes.count {
            let name = String(decoding: bytes[at..<at + 4], as: UTF8.self)
            let length = Int(bytes[at + 4]) | Int(bytes[at + 5]) << 8 | Int(bytes[at + 6]) << 16 | Int(bytes[at + 7]) << 24
            let end = min(bytes.count, at + 8 + length + (length & 1))
            if !metadataChunks.contains(name) {
                var chunk = Array(bytes[at..<end])
                // VP8X flags: ICC 0x20, EXIF 0x08, XMP 0x04.
                if name == "VP8X", chunk.count > 8 { chunk[8] &= ~UInt8(0x20 | 0x08 | 0x04) }
                body += chunk
            }
            at = end
        }
        let size = UInt32(4 + body.count)
        return Data([0x52, 0x49, 0x46, 0x46] + withUnsafeBytes(of: size.littleEndian, Array.init) + [0x57, 0x45, 0x42, 0x50] + body)
    }

    /// The chunk names of a WebP, in order.
    static func chunks(_ data: Data) -> [String] {
        let bytes = [UInt8](data)
        var names: [String] = [], at = 12
        while at + 8 <= bytes.count {
            names.append(String(decoding: bytes[at..<at + 4], as: UTF8.self))
            let length = Int(bytes[at + 4]) | Int(bytes[at + 5]) << 8 | Int(bytes[at + 6]) << 16 | Int(bytes[at + 7]) << 24
            at += 8 + length + (length & 1)
        }
        return names
    }
}
