import Foundation

/// The BlurHash of a picture (blurha.sh): a few DCT components of its colours in about 30
/// characters, which apps draw as a placeholder while the photo loads.
enum Blurhash {
    private static let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz#$%*+,-.:;=?@[]^_{|}~".utf8)

    /// `pixels`: sRGB, 3 bytes a pixel, row by row. Four components across the longer side, three across the other.
    static func encode(_ pixels: UnsafeBufferPointer<UInt8>, width: Int, height: Int) -> String {
        let (xs, ys) = width >= height ? (4, 3) : (3, 4)
        var linear = [Float](repeating: 0, count: 256)
        for value in 0..<256 { linear[value] = Float(toLinear(value)) }
        // Each component's cosines along a row and down a column, computed once, not per pixel.
        func cosines(_ count: Int, _ components: Int) -> [[Float]] {
            (0..<components).map { k in (0..<count).map { Float(cos(Double.pi * Double(k) * Double($0) / Double(count))) } }
        }
        let across = cosines(width, xs), down = cosines(height, ys)
        var factors: [(Float, Float, Float)] = []
        for j in 0..<ys {
            for i in 0..<xs {
                let normalisation: Float = (i == 0 && j == 0) ? 1 : 2
                var (r, g, b): (Float, Float, Float) = (0, 0, 0)
                for y in 0..<height {
                    let cy = normalisation * down[j][y]
                    for x in 0..<width {
                        let basis = across[i][x] * cy
                        let offset = 3 * (y * width + x)
                        r += basis * linear[Int(pixels[offset])]
                        g += basis * linear[Int(pixels[offset + 1])]
                        b += basis * linear[Int(pixels[offset + 2])]
                    }
                }
                let scale = 1 / Float(width * height)
                factors.append((r * scale, g * scale, b * scale))
            }
        }
        var hash = ""
        hash += base83((xs - 1) + (ys - 1) * 9, length: 1)
        let ac = factors.dropFirst()
        let maximum: Float
        if let largest = ac.map({ max(abs($0.0), abs($0.1), abs($0.2)) }).max() {
            let quantised = max(0, min(82, Int((largest * 166 - 0.5).rounded(.down))))
            maximum = Float(quantised + 1) / 166
            hash += base83(quantised, length: 1)
        } else {
            maximum = 1
            hash += base83(0, length: 1)
        }
        let dc = factors[0]
        hash += base83((toSRGB(dc.0) << 16) + (toSRGB(dc.1) << 8) + toSRGB(dc.2), length: 4)
        for factor in ac {
            func quantise(_ value: Float) -> Int {
                max(0, min(18, Int((signPow(value / maximum, 0.5) * 9 + 9.5).rounded(.down))))
            }
            hash += base83(quantise(factor.0) * 19 * 19 + quantise(factor.1) * 19 + quantise(factor.2), length: 2)
        }
        return hash
    }

    private static func base83(_ value: Int, length: Int) -> String {
        var digits = [UInt8](repeating: 0, count: length)
        var rest = value
        for index in stride(from: length - 1, through: 0, by: -1) {
            digits[index] = alphabet[rest % 83]
            rest /= 83
        }
        return String(decoding: digits, as: UTF8.self)
    }

    private static func toLinear(_ value: Int) -> Double {
        let v = Double(value) / 255
        return v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4)
    }

    private static func toSRGB(_ value: Float) -> Int {
        let v = Double(max(0, min(1, value)))
        return v <= 0.0031308 ? Int(v * 12.92 * 255 + 0.5) : Int((1.055 * pow(v, 1 / 2.4) - 0.055) * 255 + 0.5)
    }

    private static func signPow(_ value: Float, _ exponent: Float) -> Float {
        (value < 0 ? -1 : 1) * pow(abs(value), exponent)
    }
}
