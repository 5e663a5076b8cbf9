import BookwormCore
import Foundation

/// LibraryThing's JSON export: an object of books keyed by `books_id` (an array is accepted
/// too), with `title`, `authors` (`fl`) or `primaryauthor`, `isbn` (an object, an array or a
/// string) or `originalisbn`, and `collections` ("Your library", "Currently reading", "To read",
/// "Read but unowned", "Wishlist").
enum LibraryThingImport {
    static func plan(_ data: Data, maxRows: Int, budget: ImportBudget) throws -> ImportPlan {
        guard let text = String(data: data, encoding: .utf8) else { throw AppError.invalid("file", "is not UTF-8 text") }
        try JSONShape.check(data, file: "the file", budget: budget, maxElements: maxRows, limit: maxRows)
        let parsed: Any
        do { parsed = try JSONSerialization.jsonObject(with: data) } catch {
            throw AppError.invalid("file", "is not JSON: \(error.localizedDescription)")
        }
        var entries: [(key: String, book: [String: Any])] = []
        if let object = parsed as? [String: Any] {
            entries = object.compactMap { key, value in (value as? [String: Any]).map { (key, $0) } }
        } else if let array = parsed as? [[String: Any]] {
            entries = array.enumerated().map { ("\($0.element["books_id"] ?? $0.offset)", $0.element) }
        } else {
            throw AppError.broken("file", "is not a LibraryThing export (an object of books)")
        }
        guard !entries.isEmpty, entries.contains(where: { $0.book["title"] != nil }) else {
            throw AppError.broken("file", "is not a LibraryThing export: no book has a title")
        }
        guard entries.count <= maxRows else { throw AppError.invalid("file", "has more than \(maxRows) books") }
        let lines = LineIndex(text)
        var plan = ImportPlan()
        for entry in entries {
            let id = (entry.book["books_id"] as? String) ?? (entry.book["books_id"] as? Int).map(String.init) ?? entry.key
            let line = lines.line(key: entry.key, id: id) ?? 1
            switch book(entry.book, id: id, line: line) {
            case .success(let book): plan.records.append(book)
            case .failure(let error): plan.errors.append(error)
            }
        }
        plan.records.sort { $0.line < $1.line }
        plan.errors.sort { $0.line < $1.line }
        return plan
    }

    private static func book(_ entry: [String: Any], id: String, line: Int) -> Result<ImportRecord, ImportLineError> {
        let title = ImportText.clean(entry["title"] as? String ?? "", max: 300)
        var authors = ((entry["authors"] as? [Any]) ?? []).compactMap { ($0 as? [String: Any])?["fl"] as? String }
        if authors.isEmpty, let primary = entry["primaryauthor"] as? String {
            // "Last, First" → "First Last".
            let parts = primary.split(separator: ",", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            authors = [parts.count == 2 ? "\(parts[1]) \(parts[0])" : primary]
        }
        authors = authors.map { ImportText.clean($0, max: 200) }.filter { !$0.isEmpty }
        guard !title.isEmpty else { return .failure(ImportLineError(line: line, message: "has no title")) }
        guard !authors.isEmpty else { return .failure(ImportLineError(line: line, message: "has no author")) }
        var book = ImportRecord(line: line, key: "librarything:\(id)", isbn: isbn(entry), title: title, authors: Array(authors.prefix(20)))
        let collections = Set(((entry["collections"] as? [Any]) ?? []).compactMap { ($0 as? String)?.lowercased() })
        if collections.contains("your library") || collections.contains("favorites") { book.copies = 1 }
        if collections.contains("currently reading") {
            book.reading = "reading"
        } else if collections.contains("read but unowned") || (entry["dateread"] as? String).map({ !$0.isEmpty }) == true {
            book.reading = "finished"
            book.finishedOn = (entry["dateread"] as? String).flatMap(ImportText.day)
        } else if collections.contains("to read") {
            book.reading = "interested"
        }
        if collections.contains("wishlist") { book.wish = true }
        return .success(book)
    }

    private static func isbn(_ entry: [String: Any]) -> String? {
        var candidates: [String] = []
        switch entry["isbn"] {
        case let object as [String: Any]: candidates = object.sorted { $0.key > $1.key }.compactMap { $0.value as? String }
        case let array as [Any]: candidates = array.compactMap { $0 as? String }
        case let text as String: candidates = [text]
        default: break
        }
        if let original = entry["originalisbn"] as? String { candidates.append(original) }
        // The ISBN-13 first when there are both.
        return candidates.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            .sorted { $0.count > $1.count }.first
    }
}

/// The file line each book starts on, found in one pass: a line `"<key>": {` opens a book of
/// the object form, a line `"books_id": "<id>"` names one of the array form.
struct LineIndex {
    private var lines: [String: Int] = [:]

    init(_ text: String) {
        var number = 1
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.drop { $0 == " " || $0 == "\t" }
            if trimmed.hasPrefix("\""), let close = trimmed.dropFirst().firstIndex(of: "\"") {
                let key = String(trimmed[trimmed.index(after: trimmed.startIndex)..<close])
                let rest = trimmed[trimmed.index(after: close)...].drop { $0 == " " || $0 == ":" }
                if rest.hasPrefix("{") {
                    lines["key:" + key] = lines["key:" + key] ?? number
                } else if key == "books_id" {
                    let value = rest.trimmingCharacters(in: CharacterSet(charactersIn: "\" ,\r"))
                    lines["id:" + value] = lines["id:" + value] ?? number
                }
            }
            number += 1
        }
    }

    func line(key: String, id: String) -> Int? { lines["key:" + key] ?? lines["id:" + id] }
}
