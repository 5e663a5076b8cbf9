import Foundation
import Testing
@testable import BookwormApp
@testable import BookwormCore

/// Ids read from their canonical text by hand (`UUID(canonical:)`) agree with Foundation's
/// parser on every id, and nothing but the canonical form is read (Foundation's `sscanf` takes
/// a group one digit short).
@Suite struct UUIDTextTests {
    @Test func everyIdReadsAsFoundationReadsItInEitherCase() {
        for _ in 0..<2_000 {
            let id = UUID()
            #expect(UUID(canonical: Substring(id.apiString)) == id)
            #expect(UUID(canonical: Substring(id.uuidString)) == id)
        }
        #expect(UUID(canonical: "00000000-0000-0000-0000-000000000000") == UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        #expect(UUID(canonical: "ffffffff-ffff-ffff-ffff-ffffffffffff") == UUID(uuidString: "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF"))
    }

    @Test func nearMissesAreRefused() {
        let id = UUID().apiString
        var misses = [String(id.dropLast()), id + "0", id.replacingOccurrences(of: "-", with: ""), "", " " + id.dropFirst(),
                      String(id.prefix(7)) + id.dropFirst(8) + "0"]
        for offset in [0, 7, 8, 13, 20, 35] {
            var bytes = Array(id.utf8)
            bytes[offset] = bytes[offset] == UInt8(ascii: "-") ? UInt8(ascii: "0") : UInt8(ascii: "g")
            misses.append(String(decoding: bytes, as: UTF8.self))
        }
        for miss in misses {
            #expect(UUID(canonical: Substring(miss)) == nil, "\(miss)")
        }
    }

    @Test func aSyncNotificationGivesItsUserAndTransaction() throws {
        let user = UUID()
        let change = try #require(LiveEvents.syncChange("s \(user.apiString) 123456789"))
        #expect(change.user == user)
        #expect(change.xid == 123_456_789)
        #expect(LiveEvents.syncChange("s \(user.apiString)") == nil)
        #expect(LiveEvents.syncChange("s \(user.apiString) x") == nil)
        #expect(LiveEvents.syncChange("s \(user.apiString)1 2") == nil)
        #expect(LiveEvents.syncChange("p \(user.apiString) 2") == nil)
    }
}
