import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing
@testable import BookwormCore
@testable import Places
@testable import BookwormTestSupport


@Suite struct PinsTests {
    @Test func homePinsPublishTheirCellCentreMeetupsTheirExactPoint() async throws {
        try await withApp { app in
            let account = try await app.register()
            let home = try await app.addPin(account.token, latitude: 52.52001, longitude: 13.40502)
            let centre = Geo.cellCentre(of: GeoPoint(latitude: 52.52001, longitude: 13.40502))
            #expect(home["latitude"] as? Double == 52.52001)
            #expect(abs((home["public_latitude"] as? Double ?? 0) - centre.latitude) < 1e-9)
            #expect(abs((home["public_longitude"] as? Double ?? 0) - centre.longitude) < 1e-9)
            let meetup = try await app.addPin(account.token, label: "Café", latitude: 52.5, longitude: 13.4, kind: "meetup")
            #expect(meetup["public_latitude"] as? Double == 52.5)
            #expect(meetup["public_longitude"] as? Double == 13.4)
        }
    }

    @Test func firstPinIsDefaultAndDefaultsStayUnique() async throws {
        try await withApp { app in
            let account = try await app.register()
            let first = try await app.addPin(account.token)
            #expect(first["is_default"] as? Bool == true)
            let second = try await app.addPin(account.token, label: "Work")
            #expect(second["is_default"] as? Bool == false)
            let third = try await app.addPin(account.token, label: "Library", isDefault: true)
            #expect(third["is_default"] as? Bool == true)
            #expect(try await app.pins(account.token).filter { $0["is_default"] as? Bool == true }.count == 1)
            let secondID = try #require(second["id"] as? String)
            let patch = try await app.request(.patch, "/v1/me/pins/\(secondID)", json: ["is_default": true], token: account.token)
            #expect(try patch.jsonObject()["is_default"] as? Bool == true)
            let defaults = try await app.pins(account.token).filter { $0["is_default"] as? Bool == true }
            #expect(defaults.map { $0["id"] as? String } == [secondID])
        }
    }

    @Test func deletingTheDefaultPromotesAnotherOrLeavesNone() async throws {
        try await withApp { app in
            let account = try await app.register()
            let first = try await app.addPin(account.token)
            let second = try await app.addPin(account.token, label: "Work")
            _ = try await app.request(.delete, "/v1/me/pins/\(first["id"] as? String ?? "")", token: account.token)
            let remaining = try await app.pins(account.token)
            #expect(remaining.map { $0["id"] as? String } == [second["id"] as? String])
            #expect(remaining.first?["is_default"] as? Bool == true)
            _ = try await app.request(.delete, "/v1/me/pins/\(second["id"] as? String ?? "")", token: account.token)
            #expect(try await app.pins(account.token).isEmpty)
        }
    }

    @Test func theOnlyPinCannotStopBeingDefault() async throws {
        try await withApp { app in
            let account = try await app.register()
            let only = try await app.addPin(account.token)
            let patch = try await app.request(.patch, "/v1/me/pins/\(only["id"] as? String ?? "")", json: ["is_default": false],
                                              token: account.token)
            #expect(patch.status == .unprocessableContent)
            #expect(try await app.pins(account.token).first?["is_default"] as? Bool == true)
        }
    }

    @Test func someoneElsesPinIs403AndUnchanged() async throws {
        try await withApp { app in
            let owner = try await app.register()
            let other = try await app.register()
            let pin = try await app.addPin(owner.token)
            let id = try #require(pin["id"] as? String)
            #expect(try await app.request(.patch, "/v1/me/pins/\(id)", json: ["label": "Mine now"], token: other.token).status == .forbidden)
            #expect(try await app.request(.delete, "/v1/me/pins/\(id)", token: other.token).status == .forbidden)
            #expect(try await app.pins(owner.token).first?["label"] as? String == "Home")
            let copy = try await app.request(.post, "/v1/me/copies", json: ["title": "T", "authors": ["A"], "condition": "good", "pin_id": id],
                                             token: other.token)
            #expect(copy.status == .unprocessableContent)
        }
    }

    /// A pin always has a kind (and a label and a point): the schema forbids null for them, so
    /// a null is refused, not read as "left out" and answered 200 with nothing changed.
    @Test func patchingAPinKindWithNullIsABadRequestNamingKind() async throws {
        try await withApp { app in
            let account = try await app.register()
            let pin = try await app.addPin(account.token, kind: "meetup")
            let id = try #require(pin["id"] as? String)
            let kind = try await app.request(.patch, "/v1/me/pins/\(id)", json: ["kind": NSNull(), "label": "Park"], token: account.token)
            #expect(kind.status == .badRequest)
            #expect(try kind.problemFields() == ["kind"])
            let all = try await app.request(.patch, "/v1/me/pins/\(id)", json: [
                "label": NSNull(), "latitude": NSNull(), "longitude": NSNull()], token: account.token)
            #expect(all.status == .badRequest)
            #expect(try all.problemFields() == ["label", "latitude", "longitude"])
            let after = try #require(try await app.pins(account.token).first)
            #expect(after["kind"] as? String == "meetup")
            #expect(after["label"] as? String == "Home")
            #expect(after["latitude"] as? Double == 52.52)
        }
    }

    @Test func patchingAPinLeavesTheFieldsLeftOutAsTheyWere() async throws {
        try await withApp { app in
            let account = try await app.register()
            let pin = try await app.addPin(account.token, kind: "meetup")
            let id = try #require(pin["id"] as? String)
            let null = try await app.request(.patch, "/v1/me/pins/\(id)", json: ["label": "Park", "is_default": NSNull()],
                                             token: account.token)
            #expect(null.status == .badRequest)
            #expect(try null.problemFields() == ["is_default"])
            let patch = try await app.request(.patch, "/v1/me/pins/\(id)", json: ["label": "Park"], token: account.token)
            #expect(patch.status == .ok)
            let after = try patch.jsonObject()
            #expect(after["label"] as? String == "Park")
            #expect(after["kind"] as? String == "meetup")
            #expect(after["latitude"] as? Double == 52.52)
            #expect(after["longitude"] as? Double == 13.405)
            #expect(after["is_default"] as? Bool == true)
        }
    }

    @Test(arguments: [(91.0, 0.0), (-90.5, 0.0), (0.0, 180.5), (0.0, -181.0)])
    func outOfRangeCoordinatesAre400(latitude: Double, longitude: Double) async throws {
        try await withApp { app in
            let account = try await app.register()
            let response = try await app.request(.post, "/v1/me/pins", json: [
                "label": "X", "latitude": latitude, "longitude": longitude, "kind": "home"], token: account.token)
            #expect(response.status == .badRequest)
            #expect(try response.problemFields().count == 1)
        }
    }

    @Test func copiesCanBePlacedOnTheirOwnersPins() async throws {
        try await withApp { app in
            let account = try await app.register()
            let pin = try await app.addPin(account.token)
            let pinID = try #require(pin["id"] as? String)
            let copy = try await app.request(.post, "/v1/me/copies", json: ["title": "T", "authors": ["A"], "condition": "good", "pin_id": pinID],
                                             token: account.token)
            #expect(copy.status == .created)
            #expect(try copy.jsonObject()["pin_id"] as? String == pinID)
        }
    }
}
