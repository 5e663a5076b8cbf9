import Foundation
import BookwormCore

/// Real pictures for the photo tests, made with libvips' own command (`vips`, from
/// libvips-tools) and with metadata written into them byte by byte, as a phone would.
package enum TestPictures {
    package struct RGB: Sendable { package let r: UInt8, g: UInt8, b: UInt8 }
    package static let red = RGB(r: 220, g: 20, b: 20), blue = RGB(r: 20, g: 20, b: 220)

    /// A picture whose left half is `left` and right half `right`, as a binary PPM.
    package static func ppm(width: Int, height: Int, left: RGB = red, right: RGB = blue) -> Data {
        var data = Data("P6\n\(width) \(height)\n255\n".utf8)
        data.reserveCapacity(data.count + width * height * 3)
        for _ in 0..<height {
            for x in 0..<width {
                let colour = x < width / 2 ? left : right
                data.append(contentsOf: [colour.r, colour.g, colour.b])
            }
        }
        return data
    }

    /// `data` (a file of type `from`, such as "ppm") written as `to` ("jpg", "png[compression=1]", "heic", "gif").
    package static func convert(_ data: Data, from: String, to: String) throws -> Data {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pictures-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let input = folder.appendingPathComponent("in.\(from)"), output = folder.appendingPathComponent("out.\(to)")
        try data.write(to: input)
        _ = try tool("vips", "copy", input.path, output.path)
        let written = output.path.split(separator: "[").first.map(String.init) ?? output.path
        return try Data(contentsOf: URL(fileURLWithPath: written))
    }

    /// A phone's photo: a 400 × 200 JPEG (red left, blue right) stored sideways with EXIF
    /// orientation 6, a GPS position, the camera's serial number, an XMP packet and a comment.
    package static func phoneJPEG(width: Int = 400, height: Int = 200) throws -> Data {
        withPhoneMetadata(try convert(ppm(width: width, height: height), from: "ppm", to: "jpg"))
    }

    /// `jpeg` with a phone's metadata spliced in after its start: EXIF (orientation 6, GPS,
    /// serial number), XMP and a comment.
    package static func withPhoneMetadata(_ jpeg: Data) -> Data {
        let xmp = Data("http://ns.adobe.com/xap/1.0/\0<x:xmpmeta><rdf:Description City=\"Secret Lane 12\"/></x:xmpmeta>".utf8)
        let segments = segment(0xE1, Data("Exif\0\0".utf8) + PhoneEXIF.tiff()) + segment(0xE1, xmp)
            + segment(0xFE, Data("Home: Secret Lane 12".utf8))
        return jpeg.prefix(2) + segments + jpeg.dropFirst(2)
    }

    /// A PNG with text chunks naming an address.
    package static func pngWithText() throws -> Data {
        let png = try convert(ppm(width: 300, height: 300), from: "ppm", to: "png")
        let text = chunk("tEXt", Data("Comment\0Home: Secret Lane 12".utf8)) + chunk("iTXt", Data("Location\0\0\0\0\0Secret Lane 12".utf8))
        // After the signature (8 bytes) and IHDR (25 bytes).
        return png.prefix(33) + text + png.dropFirst(33)
    }

    /// A PNG whose header says 20,000 × 20,000 pixels, followed by a little data.
    package static func pngBomb() -> Data {
        var header = Data()
        for value in [20_000, 20_000] { header.append(contentsOf: withUnsafeBytes(of: UInt32(value).bigEndian, Array.init)) }
        header.append(contentsOf: [8, 2, 0, 0, 0])
        return Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) + chunk("IHDR", header)
            + chunk("IDAT", Data([0x78, 0x9C, 0x63, 0x60, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01])) + chunk("IEND", Data())
    }

    /// Width and height as `vipsheader` reads them.
    package static func size(_ data: Data, ext: String) throws -> (width: Int, height: Int) {
        let path = try temporary(data, ext: ext)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let width = Int(try tool("vipsheader", "-f", "width", path).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        let height = Int(try tool("vipsheader", "-f", "height", path).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        return (width, height)
    }

    /// The colour at (x, y) as `vips getpoint` decodes it.
    package static func pixel(_ data: Data, ext: String, x: Int, y: Int) throws -> [Double] {
        let path = try temporary(data, ext: ext)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try tool("vips", "getpoint", path, "\(x)", "\(y)").split(whereSeparator: \.isWhitespace).compactMap { Double($0) }
    }

    /// The JPEG's segments before its image data, by marker (0xE1 is APP1, 0xFE a comment).
    package static func jpegMarkers(_ data: Data) -> [UInt8] {
        let bytes = [UInt8](data)
        var markers: [UInt8] = [], at = 2
        while at + 4 <= bytes.count, bytes[at] == 0xFF, bytes[at + 1] != 0xDA {
            markers.append(bytes[at + 1])
            at += 2 + Int(bytes[at + 2]) << 8 + Int(bytes[at + 3])
        }
        return markers
    }

    package static func tool(_ arguments: String...) throws -> String { try tool(arguments) }

    /// Through `ChildProcess` (posix_spawn), not Foundation's `Process`: its `run()` on Linux
    /// reads past a buffer while listing `/proc/self/fd` and crashed the whole test run in
    /// `make test` (swiftlang/swift-corelibs-foundation#5472, fixed after Swift 6.3.1).
    /// Standard error comes with the output; libvips' tools write nothing there when they succeed.
    package static func tool(_ arguments: [String]) throws -> String {
        let result = try ChildProcess.run("/usr/bin/env", arguments)
        guard result.status == 0 else {
            throw TestFailure("\(arguments.joined(separator: " ")): \(result.output) (libvips-tools comes with `make deps`)")
        }
        return result.output
    }

    private static func temporary(_ data: Data, ext: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("picture-\(UUID().uuidString).\(ext)").path
        try data.write(to: URL(fileURLWithPath: path))
        return path
    }

    private static func segment(_ marker: UInt8, _ body: Data) -> Data {
        let length = body.count + 2
        return Data([0xFF, marker, UInt8(length >> 8), UInt8(length & 0xFF)]) + body
    }

    private static func chunk(_ type: String, _ body: Data) -> Data {
        let typed = Data(type.utf8) + body
        return Data(withUnsafeBytes(of: UInt32(body.count).bigEndian, Array.init)) + typed
            + Data(withUnsafeBytes(of: crc32(typed).bigEndian, Array.init))
    }

    private static func crc32(_ data: Data) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in data {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
}

/// EXIF as a phone writes it (big-endian TIFF): IFD0 with make and orientation 6, an EXIF IFD
/// with the body's serial number, and a GPS IFD with a position.
enum PhoneEXIF {
    enum Value {
        case ascii(String), short(Int), long(Int), rationals([(Int, Int)])

        var type: Int { switch self { case .ascii: 2; case .short: 3; case .long: 4; case .rationals: 5 } }
        var count: Int {
            switch self {
            case .ascii(let text): text.utf8.count + 1
            case .short, .long: 1
            case .rationals(let values): values.count
            }
        }
        var bytes: [UInt8] {
            switch self {
            case .ascii(let text): Array(text.utf8) + [0]
            case .short(let value): be(value, 2) + [0, 0]
            case .long(let value): be(value, 4)
            case .rationals(let values): values.flatMap { be($0.0, 4) + be($0.1, 4) }
            }
        }
    }

    static func be(_ value: Int, _ width: Int) -> [UInt8] { (0..<width).reversed().map { UInt8((value >> (8 * $0)) & 0xFF) } }

    /// An IFD at `offset` with its out-of-line values after it.
    static func ifd(_ entries: [(Int, Value)], at offset: Int) -> [UInt8] {
        var head = be(entries.count, 2), tail: [UInt8] = []
        let dataStart = offset + 2 + 12 * entries.count + 4
        for (tag, value) in entries {
            head += be(tag, 2) + be(value.type, 2) + be(value.count, 4)
            let bytes = value.bytes
            if bytes.count <= 4 {
                head += bytes + [UInt8](repeating: 0, count: 4 - bytes.count)
            } else {
                head += be(dataStart + tail.count, 4)
                tail += bytes + (bytes.count % 2 == 1 ? [0] : [])
            }
        }
        return head + be(0, 4) + tail
    }

    static func tiff() -> Data {
        let exif: [(Int, Value)] = [(0xA431, .ascii("SN-4242-SECRET"))]
        let gps: [(Int, Value)] = [(1, .ascii("N")), (2, .rationals([(51, 1), (30, 1), (1234, 100)])),
                                   (3, .ascii("W")), (4, .rationals([(0, 1), (7, 1), (3999, 100)]))]
        func main(exifAt: Int, gpsAt: Int) -> [UInt8] {
            ifd([(0x010F, .ascii("BookwormPhone")), (0x0112, .short(6)), (0x8769, .long(exifAt)), (0x8825, .long(gpsAt))], at: 8)
        }
        let first = main(exifAt: 0, gpsAt: 0).count
        let exifBytes = ifd(exif, at: 8 + first)
        let gpsBytes = ifd(gps, at: 8 + first + exifBytes.count)
        return Data([0x4D, 0x4D, 0x00, 0x2A] + be(8, 4) + main(exifAt: 8 + first, gpsAt: 8 + first + exifBytes.count) + exifBytes + gpsBytes)
    }
}

extension TestPictures {
    /// A file the `vips` command makes: `arguments` with `OUT` standing for the output path.
    package static func made(_ ext: String, _ arguments: String...) throws -> Data {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("made-\(UUID().uuidString).\(ext)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        _ = try tool(["vips"] + arguments.map { $0 == "OUT" ? path : $0 })
        return try Data(contentsOf: URL(fileURLWithPath: path))
    }

    /// A picture of sRGB colour `colour` written in Display P3 with its profile, as an iPhone does.
    package static func displayP3JPEG(_ colour: RGB) throws -> Data {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("p3-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let input = folder.appendingPathComponent("in.ppm"), output = folder.appendingPathComponent("out.jpg")
        try ppm(width: 64, height: 64, left: colour, right: colour).write(to: input)
        _ = try tool("vips", "icc_transform", input.path, output.path, "p3", "--input-profile", "srgb")
        return try Data(contentsOf: output)
    }
}
