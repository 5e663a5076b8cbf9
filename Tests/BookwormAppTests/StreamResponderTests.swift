import Foundation
import Hummingbird
import Testing
@testable import BookwormCore
@testable import BookwormApp

/// Which requests `StreamResponder` makes in a child task: every event stream the document
/// serves, however its path is spelt, and nothing else.
@Suite struct StreamResponderTests {
    typealias Responder = StreamResponder<RouterResponder<AppRequestContext>>

    @Test func theStreamPathsAreTheDocumentsEventStreams() throws {
        let document = try JSONSerialization.jsonObject(with: BundledResources.openAPIDocument()) as? [String: Any]
        let paths = try #require(document?["paths"] as? [String: [String: Any]])
        var streams: Set<String> = []
        for (path, operations) in paths {
            for case let operation as [String: Any] in operations.values {
                let responses = operation["responses"] as? [String: [String: Any]] ?? [:]
                if responses.values.contains(where: { ($0["content"] as? [String: Any])?["text/event-stream"] != nil }) {
                    streams.insert(path)
                }
            }
        }
        #expect(!streams.isEmpty)
        #expect(streams == streamPaths)
    }

    @Test func aStreamPathWithEmptySegmentsIsAStreamAndNoOtherPathIs() {
        let paths: Set<String> = ["/v1/me/events"]
        for path in ["/v1/me/events", "/v1/me/events/", "//v1//me/events"] { #expect(Responder.matches(path, paths), "\(path)") }
        for path in ["/v1/me", "/v1/me/events/x", "/v1/me/eventsx", "/", ""] { #expect(!Responder.matches(path, paths), "\(path)") }
    }
}
