import Foundation
import Testing
@testable import Accounts
@testable import BookwormCore
@testable import Catalog
@testable import Places

/// The OpenAPI document and the server agree on what a `null` in a PATCH body does: a property
/// the document makes nullable is one the body decodes itself (and the document says what null
/// does there); any other null is the 400 `decodeStrict` answers for a `PatchBody`.
@Suite struct PatchSchemaTests {
    struct Body: Sendable, CustomTestStringConvertible {
        let schema: String
        let keys: Set<String>
        let nullable: Set<String>
        var testDescription: String { schema }

        init<B: PatchBody>(_ schema: String, _ body: B.Type) {
            self.schema = schema
            keys = Set(B.CodingKeys.allCases.map(\.stringValue))
            nullable = Set(B.nullableKeys.map(\.stringValue))
        }
    }

    static let bodies = [
        Body("UpdatePinRequest", UpdatePinBody.self),
        Body("UpdateCopyRequest", UpdateCopyBody.self),
        Body("UpdateMeRequest", UpdateMeBody.self),
    ]

    static func document() throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: BundledResources.openAPIDocument()) as? [String: Any] ?? [:]
    }

    @Test(arguments: bodies)
    func aPatchBodyTakesNullExactlyWhereTheDocumentSaysWhatNullDoes(body: Body) throws {
        let schemas = (try Self.document()["components"] as? [String: Any])?["schemas"] as? [String: Any]
        let properties = try #require((schemas?[body.schema] as? [String: Any])?["properties"] as? [String: [String: Any]])
        #expect(Set(properties.keys) == body.keys)
        let nullable = Set(properties.filter { ($0.value["type"] as? [String])?.contains("null") == true }.keys)
        #expect(nullable == body.nullable)
        for key in nullable {
            let description = properties[key]?["description"] as? String ?? ""
            #expect(description.hasPrefix("null "), "\(body.schema).\(key) does not say what null does")
        }
    }

    /// A new PATCH operation must be listed above, so its body is a `PatchBody` too.
    @Test func everyPatchOperationIsCovered() throws {
        let paths = try Self.document()["paths"] as? [String: [String: Any]] ?? [:]
        let patched = Set(paths.values.compactMap { operations -> String? in
            let body = (operations["patch"] as? [String: Any])?["requestBody"] as? [String: Any]
            let schema = ((body?["content"] as? [String: Any])?["application/json"] as? [String: Any])?["schema"] as? [String: Any]
            return (schema?["$ref"] as? String)?.components(separatedBy: "/").last
        })
        #expect(patched == Set(Self.bodies.map(\.schema)))
    }
}
