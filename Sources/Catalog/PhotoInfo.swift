import BookwormCore
import Foundation

/// A copy's photo as apps show it: its full size's dimensions, a placeholder, and a URL per size.
package struct PhotoInfo: Encodable, Sendable, JSONWritable {
    let id: String
    let width: Int
    let height: Int
    let blurhash: String

    /// From the copy rows' photo column: "width height blurhash" (nil until the photo has its sizes).
    init?(id: String?, column: String?) {
        guard let id, let parts = column?.split(separator: " "), parts.count == 3, let width = Int(parts[0]), let height = Int(parts[1]) else {
            return nil
        }
        self.init(id: id, width: width, height: height, blurhash: String(parts[2]))
    }

    init(id: String, width: Int, height: Int, blurhash: String) {
        (self.id, self.width, self.height, self.blurhash) = (id, width, height, blurhash)
    }

    var urls: [String: String] {
        Dictionary(uniqueKeysWithValues: MadePhoto.Size.allCases.map { ($0.rawValue, "/v1/photos/\(id)?size=\($0.rawValue)") })
    }

    enum CodingKeys: String, CodingKey { case id, width, height, blurhash, urls }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(blurhash, forKey: .blurhash)
        try container.encode(height, forKey: .height)
        try container.encode(id, forKey: .id)
        try container.encode(urls, forKey: .urls)
        try container.encode(width, forKey: .width)
    }

    package func write(to json: inout JSONWriter) {
        json.object { json in
            json.key("blurhash"); json.string(blurhash)
            json.key("height"); json.number(Double(height))
            json.key("id"); json.string(id)
            json.key("urls")
            json.object { json in
                json.key("card"); json.string("/v1/photos/\(id)?size=card")
                json.key("full"); json.string("/v1/photos/\(id)?size=full")
                json.key("thumb"); json.string("/v1/photos/\(id)?size=thumb")
            }
            json.key("width"); json.number(Double(width))
        }
    }
}
