import Foundation
import Testing
@testable import BookwormCore

/// `make test` names a hung run's culprits with `Tools/unfinished-tests`, from the run's log.
@Suite struct HangReportTests {
    static let tool = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Tools/unfinished-tests").path

    @Test func aHungRunNamesTheTestsThatStartedAndNeverFinished() throws {
        let log = """
            ◇ Test run started.
            ◇ Test finishes() started.
            ◇ Test hangs() started.
            ◇ Test parameterised(x:) started.
            ◇ Test case passing 1 argument x → 1 to parameterised(x:) started.
            ✔ Test finishes() passed after 0.100 seconds.
            2026-11-28T12:00:00+0000 info test: a log line that says passed
            ✘ Test parameterised(x:) with 2 test cases failed after 0.200 seconds with 1 issue.
            ◇ Test alsoHangs() started.
            ✔ Test knownIssue() passed after 0.1 seconds with 1 known issue.
            """
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("hang-\(UUID().uuidString).log").path
        try log.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = try ChildProcess.run("/usr/bin/env", ["python3", Self.tool, path])
        #expect(result.status == 0)
        #expect(result.output.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) } == ["hangs()", "alsoHangs()"])
    }

    @Test func aRunWhereEveryTestFinishedSaysItHungOutsideATest() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("hang-\(UUID().uuidString).log").path
        try "◇ Test run started.\n◇ Test a() started.\n✔ Test a() passed after 1.0 seconds.\n".write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = try ChildProcess.run("/usr/bin/env", ["python3", Self.tool, path])
        #expect(result.output.contains("hung outside a test"))
    }
}
