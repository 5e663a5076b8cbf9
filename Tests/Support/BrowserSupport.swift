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

    /// What a page's `fetch` of the API gave: the answer, or the browser's refusal.
    struct Fetch: Decodable {
        let status: Int?
        let username: String?
        let etag: String?
        let error: String?
    }

    struct CrossOriginVisit: Decodable {
        /// From `http://127.0.0.1:<pagePort>`.
        let listed: Fetch
        /// The same page from another port: another origin.
        let other: Fetch
    }

    /// `pages.py cors`: a page served on `pagePort`, then on another port, each fetching `api`
    /// with `token` from inside the browser.
    static func crossOrigin(pagePort: Int, api: String, token: String) async throws -> CrossOriginVisit {
        try await runJSON(["cors", String(pagePort), api, token])
    }

    /// `pages.py` with `arguments`; the page as the browser saw it.
    static func run(_ arguments: [String]) async throws -> Visit {
        try await runJSON(arguments)
    }

    /// `pages.py` with `arguments`; its last line of JSON.
    static func runJSON<Result: Decodable>(_ arguments: [String]) async throws -> Result {
        guard let python = ProcessInfo.processInfo.environment["BOOKWORM_BROWSER_PYTHON"],
              FileManager.default.isExecutableFile(atPath: python) else {
            throw TestFailure("BOOKWORM_BROWSER_PYTHON is not set to a Python with selenium: run the tests with `make test`, which installs chromium, chromium-driver and selenium")
        }
        let script = try script()
        let result = try await offThePool { try ChildProcess.run(python, [script] + arguments) }
        guard result.status == 0, let json = result.output.split(separator: "\n").last(where: { $0.hasPrefix("{") }) else {
            throw TestFailure("the browser could not run the page (exit \(result.status)): \(result.output.suffix(1500))")
        }
        return try JSONDecoder().decode(Result.self, from: Data(json.utf8))
    }
}
