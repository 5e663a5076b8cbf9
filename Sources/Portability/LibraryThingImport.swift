import BookwormCore
import Foundation

/// LibraryThing's JSON export: an object of books keyed by `books_id` (an array is accepted
/// too), with `title`, `authors` (`fl`) or `primaryauthor`, `isbn` (an object, an array or a
/// string) or `originalisbn`, and `collections` ("Your library", "Currently reading", "To read",
/// "Read but unowned", "Wishlist").
enum LibraryThingImport {
    static func plan(_ data: Data, maxRows: Int, budget: ImportBudget) throws -> ImportPlan {
        var plan = ImportPlan()
        var titled = false, index = 0
        let isObject = try JSONElements.read(data, file: "the file", budget: budget, maxElements: maxRows, limit: maxRows) { element in
            defer { index += 1 }
            guard let entry = JSONElements.object(element) else {
                return plan.errors.append(ImportLineError(line: element.line, message: "is not a book (a JSON object)"))
            }
            titled = titled || entry["title"] != nil
            let key = JSONElements.key(element) ?? "\(entry["books_id"] ?? index)"
            let id = (entry["books_id"] as? String) ?? (entry["books_id"] as? Int).map(String.init) ?? key
            switch book(entry, id: id, line: line(of: element)) {
            case .success(let book): plan.records.append(book)
            case .failure(let error): plan.errors.append(error)
            }
        }
        guard isObject || index > 0 else { throw AppError.broken("file", "is not a LibraryThing export (an object of books)") }
        guard titled else { throw AppError.broken("file", "is not a LibraryThing export: no book has a title") }
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

extension LibraryThingImport {
    /// The line a book is named on: its key's in an object of books, its `books_id`'s (else its
    /// own) in an array.
    static func line(of element: JSONElements.Element) -> Int {
        guard element.key == nil, let books = element.value.range(of: Data(#""books_id""#.utf8)) else { return element.line }
        return element.line + element.value[element.value.startIndex..<books.lowerBound].reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
    }
}
