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
        var plan = ImportPlan()
        /// Each object of the member `name`, numbered from 1, built one at a time.
        func objects(_ name: String, _ visit: (Int, [String: Any]) -> Void) throws {
            guard let entry = archive[name] else { return }
            let bytes = try archive.boundedContents(of: entry, budget: budget.maxInflatedBytes - inflated)
            inflated += bytes.count
            var index = 0
            let isObject = try JSONElements.read(bytes, file: name, budget: budget, maxElements: maxRows - rows, limit: maxRows) { element in
                index += 1
                guard let object = JSONElements.object(element) else {
                    return plan.errors.append(ImportLineError(line: index, message: "\(name): not an object"))
                }
                visit(index, object)
            }
            guard !isObject else { throw AppError.broken("file", "\(name) is not a JSON array of objects") }
            rows += index
        }
        try objects("pins.json") { line, pin in
            guard let id = pin["id"] as? String, let label = pin["label"] as? String, let kind = pin["kind"] as? String,
                  let latitude = pin["latitude"] as? Double, let longitude = pin["longitude"] as? Double else {
                return plan.errors.append(ImportLineError(line: line, message: "pins.json: not a pin"))
            }
            plan.pins.append(ImportPin(line: line, key: "bookworm:pin:\(id)", label: ImportText.clean(label, max: 80), kind: kind,
                                       latitude: latitude, longitude: longitude, isDefault: pin["is_default"] as? Bool ?? false))
        }
        try objects("copies.json") { line, object in
            add(object, line: line, file: "copies.json", to: &plan) { record, object in
                record.copies = 1
                record.condition = object["condition"] as? String ?? "good"
                record.notes = (object["notes"] as? String).map { ImportText.clean($0, max: 2000) }
                record.pinKey = (object["pin_id"] as? String).map { "bookworm:pin:\($0)" }
            }
        }
        try objects("readings.json") { line, object in
            add(object, line: line, file: "readings.json", to: &plan) { record, object in
                record.reading = object["state"] as? String
                record.private_ = object["private"] as? Bool ?? false
                record.startedOn = object["started_on"] as? String
                record.finishedOn = object["finished_on"] as? String
            }
        }
        try objects("wishes.json") { line, object in
            add(object, line: line, file: "wishes.json", to: &plan) { record, object in
                record.wish = true
                record.wishAnyEdition = object["any_edition"] as? Bool ?? true
                record.wishRadiusKm = object["radius_km"] as? Double ?? 25
                record.wishMinCondition = object["min_condition"] as? String
                record.pinKey = (object["pin_id"] as? String).map { "bookworm:pin:\($0)" }
            }
        }
        return plan
    }

    private static func add(_ object: [String: Any], line: Int, file: String, to plan: inout ImportPlan,
                            _ fill: (inout ImportRecord, [String: Any]) -> Void) {
        let book = object["book"] as? [String: Any] ?? [:]
        let title = ImportText.clean(book["title"] as? String ?? "", max: 300)
        let authors = ((book["authors"] as? [Any]) ?? []).compactMap { $0 as? String }.map { ImportText.clean($0, max: 200) }
            .filter { !$0.isEmpty }
        guard !title.isEmpty, !authors.isEmpty else {
            return plan.errors.append(ImportLineError(line: line, message: "\(file): no book title or author"))
        }
        let id = (object["id"] as? String) ?? (book["id"] as? String) ?? "\(line - 1)"
        var record = ImportRecord(line: line, key: "bookworm:\(file):\(id)", isbn: book["isbn13"] as? String,
                                  title: title, authors: Array(authors.prefix(20)))
        fill(&record, object)
        plan.records.append(record)
    }
}
