import Foundation
import Testing

/// The rooms' dependency direction, checked on the sources themselves. SwiftPM shares one
/// module folder between targets, so an upward `import` can compile when the higher module
/// happens to be built already; this test makes it fail every time.
@Suite struct ModuleGraphTests {
    /// Bottom-up: a room may import only rooms before it.
    static let rooms = ["BookwormCore", "Mail", "Accounts", "Places", "Catalog", "Discovery", "Exchange", "Portability", "BookwormApp"]

    static let sources = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources")

    @Test func everyRoomImportsOnlyRoomsBelowIt() throws {
        var violations: [String] = []
        var checked = 0
        for (level, room) in Self.rooms.enumerated() {
            let allowed = Set(Self.rooms.prefix(level))
            let forbidden = Set(Self.rooms).subtracting(allowed)
            for file in try swiftFiles(in: Self.sources.appendingPathComponent(room)) {
                checked += 1
                for imported in try imports(of: file) where forbidden.contains(imported) {
                    violations.append("\(room)/\(file.lastPathComponent) imports \(imported)")
                }
            }
        }
        #expect(checked > 50)
        #expect(violations.isEmpty, "\(violations)")
    }

    /// Stores hold SQL only; a multi-step write's transaction belongs to its service, which
    /// passes the connection down.
    @Test func onlyServicesOpenTransactions() throws {
        var stores = 0
        for room in Self.rooms {
            for file in try swiftFiles(in: Self.sources.appendingPathComponent(room)) where file.lastPathComponent.hasSuffix("Store.swift") {
                stores += 1
                let text = try String(contentsOf: file, encoding: .utf8)
                #expect(!text.contains(".transaction(") && !text.contains("withTransaction("), "\(room)/\(file.lastPathComponent)")
            }
        }
        #expect(stores > 20)
    }

    @Test func theProductDoesNotImportTheBenchmarks() throws {
        for room in Self.rooms + ["bookworm"] {
            for file in try swiftFiles(in: Self.sources.appendingPathComponent(room)) {
                #expect(try !imports(of: file).contains("BookwormBench"), "\(file.lastPathComponent)")
            }
        }
    }

    private func swiftFiles(in folder: URL) throws -> [URL] {
        let enumerator = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil)
        return (enumerator?.allObjects as? [URL] ?? []).filter { $0.pathExtension == "swift" }
    }

    private func imports(of file: URL) throws -> [String] {
        try String(contentsOf: file, encoding: .utf8).split(separator: "\n").compactMap { line in
            let words = line.split(separator: " ")
            guard let index = words.firstIndex(of: "import"), index + 1 < words.count,
                  words[..<index].allSatisfy({ $0.hasPrefix("@") }) else { return nil }
            return String(words[index + 1])
        }
    }
}
