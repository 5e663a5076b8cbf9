import BookwormCore
import Foundation
import ZIPFoundation

/// This service's own export zip: `pins.json`, `copies.json`, `readings.json` and `wishes.json`
/// (the shapes their GETs return). An error's line is the entry's place in its file.
enum BookwormImport {
    static func plan(_ data: Data, maxRows: Int, budget: ImportBudget) throws -> ImportPlan {
        let archive: Archive
        do { archive = try Archive(data: data, accessMode: .read) } catch { throw AppError.broken("file", "is not a zip archive") }
        guard archive["copies.json"] != nil || archive["readings.json"] != nil else {
            throw AppError.broken("file", "is not a Bookworm export: no copies.json or readings.json")
        }
        var inflated = 0, rows = 0
        func entries(_ name: String) throws -> [[String: Any]] {
            guard let entry = archive[name] else { return [] }
            let bytes = try archive.boundedContents(of: entry, budget: budget.maxInflatedBytes - inflated)
            inflated += bytes.count
            rows += try JSONShape.check(bytes, file: name, budget: budget, maxElements: maxRows - rows, limit: maxRows)
            guard let array = (try? JSONSerialization.jsonObject(with: bytes)) as? [[String: Any]] else {
                throw AppError.broken("file", "\(name) is not a JSON array of objects")
            }
            return array
        }
        let pins = try entries("pins.json"), copies = try entries("copies.json")
        let readings = try entries("readings.json"), wishes = try entries("wishes.json")
        var plan = ImportPlan()
        for (index, pin) in pins.enumerated() {
            guard let id = pin["id"] as? String, let label = pin["label"] as? String, let kind = pin["kind"] as? String,
                  let latitude = pin["latitude"] as? Double, let longitude = pin["longitude"] as? Double else {
                plan.errors.append(ImportLineError(line: index + 1, message: "pins.json: not a pin"))
                continue
            }
            plan.pins.append(ImportPin(line: index + 1, key: "bookworm:pin:\(id)", label: ImportText.clean(label, max: 80), kind: kind,
                                       latitude: latitude, longitude: longitude, isDefault: pin["is_default"] as? Bool ?? false))
        }
        add(copies, file: "copies.json", to: &plan) { record, object in
            record.copies = 1
            record.condition = object["condition"] as? String ?? "good"
            record.notes = (object["notes"] as? String).map { ImportText.clean($0, max: 2000) }
            record.pinKey = (object["pin_id"] as? String).map { "bookworm:pin:\($0)" }
        }
        add(readings, file: "readings.json", to: &plan) { record, object in
            record.reading = object["state"] as? String
            record.private_ = object["private"] as? Bool ?? false
            record.startedOn = object["started_on"] as? String
            record.finishedOn = object["finished_on"] as? String
        }
        add(wishes, file: "wishes.json", to: &plan) { record, object in
            record.wish = true
            record.wishAnyEdition = object["any_edition"] as? Bool ?? true
            record.wishRadiusKm = object["radius_km"] as? Double ?? 25
            record.wishMinCondition = object["min_condition"] as? String
            record.pinKey = (object["pin_id"] as? String).map { "bookworm:pin:\($0)" }
        }
        return plan
    }

    private static func add(_ objects: [[String: Any]], file: String, to plan: inout ImportPlan,
                            _ fill: (inout ImportRecord, [String: Any]) -> Void) {
        for (index, object) in objects.enumerated() {
            let book = object["book"] as? [String: Any] ?? [:]
            let title = ImportText.clean(book["title"] as? String ?? "", max: 300)
            let authors = ((book["authors"] as? [Any]) ?? []).compactMap { $0 as? String }.map { ImportText.clean($0, max: 200) }
                .filter { !$0.isEmpty }
            guard !title.isEmpty, !authors.isEmpty else {
                plan.errors.append(ImportLineError(line: index + 1, message: "\(file): no book title or author"))
                continue
            }
            let id = (object["id"] as? String) ?? (book["id"] as? String) ?? "\(index)"
            var record = ImportRecord(line: index + 1, key: "bookworm:\(file):\(id)", isbn: book["isbn13"] as? String,
                                      title: title, authors: Array(authors.prefix(20)))
            fill(&record, object)
            plan.records.append(record)
        }
    }
}
