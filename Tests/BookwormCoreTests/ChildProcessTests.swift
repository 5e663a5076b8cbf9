import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import BookwormCore

@Suite struct ChildProcessTests {
    /// A PostgreSQL started while the test process held about 960 sockets without `CLOEXEC`
    /// (a flood test next to it) inherited them all and refused to start.
    @Test func aChildInheritsNoDescriptorBeyondItsStandardThree() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)  // no CLOEXEC: the kind of descriptor that leaked
        defer { ends.forEach { close($0) } }
        let open = try ChildProcess.run("/bin/ls", ["/proc/self/fd"]).output
            .split(whereSeparator: \.isNewline).compactMap { Int32($0) }
        #expect(open.contains(1))
        #expect(!open.contains(ends[0]) && !open.contains(ends[1]), "child's descriptors: \(open)")
        // 0–2 are its standard streams, and 3 is the directory `ls` itself is reading.
        #expect(open.allSatisfy { $0 <= 3 }, "child's descriptors: \(open)")
    }
}
