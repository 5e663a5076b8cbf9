import Foundation
@testable import BookwormCore

/// A real headless chromium, driven by selenium (`Tests/Browser/pages.py`) from the Python that
/// `make test` prepares (`BOOKWORM_BROWSER_PYTHON`). No browser is a failure, never a skip.
enum Browser {
    struct Page: Decodable {
        let title: String
        let heading: String
        let error: String?
        let message: String?
        let scripts: Int
    }

    struct Visit: Decodable {
        let before: Page
        let after: Page?
    }

    static func script() throws -> String {
        var folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        folder.deleteLastPathComponent()
        return folder.appendingPathComponent("Browser/pages.py").path
    }

    /// `pages.py` with `arguments`; the page as the browser saw it.
    static func run(_ arguments: [String]) async throws -> Visit {
        guard let python = ProcessInfo.processInfo.environment["BOOKWORM_BROWSER_PYTHON"],
              FileManager.default.isExecutableFile(atPath: python) else {
            throw TestFailure("BOOKWORM_BROWSER_PYTHON is not set to a Python with selenium: run the tests with `make test`, which installs chromium, chromium-driver and selenium")
        }
        let script = try script()
        let result = try await offThePool { try ChildProcess.run(python, [script] + arguments) }
        guard result.status == 0, let json = result.output.split(separator: "\n").last(where: { $0.hasPrefix("{") }) else {
            throw TestFailure("the browser could not run the page (exit \(result.status)): \(result.output.suffix(1500))")
        }
        return try JSONDecoder().decode(Visit.self, from: Data(json.utf8))
    }
}
