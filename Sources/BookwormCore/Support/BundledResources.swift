import Foundation

/// The files this binary carries (SwiftPM resources), so it serves and migrates without the
/// source tree.
package enum BundledResources {
    package static func openAPIDocument() throws -> Data {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "json") else {
            throw MigrationError.missingResources
        }
        return try Data(contentsOf: url)
    }
}
