import BookwormCore
import Foundation

/// Goodreads' "Export Library" CSV (31 columns): ISBNs written `="…"`, `Exclusive Shelf` for
/// the reading, `Owned Copies` for copies, `to-read` also a wish.
enum GoodreadsImport {
    static let required = ["Book Id", "Title", "Author", "Additional Authors", "ISBN", "ISBN13", "Exclusive Shelf", "Owned Copies"]

    static func plan(_ data: Data, maxRows: Int, budget: ImportBudget) throws -> ImportPlan {
        var header: (fields: Int, columns: [String: Int])?
        var plan = ImportPlan()
        do {
            try CSVReader.read(data, maxField: budget.maxFieldCharacters) { record in
                guard let header else { return header = try columns(record) }
                guard plan.total < maxRows else { throw AppError.invalid("file", "has more than \(maxRows) rows") }
                guard record.fields.count == header.fields else {
                    return plan.errors.append(ImportLineError(line: record.line, message: "has \(record.fields.count) fields; the header has \(header.fields)"))
                }
                let field = { (name: String) -> String in header.columns[name].map { ImportText.trimmed(record.fields[$0]) } ?? "" }
                switch book(record, field: field) {
                case .success(let book): plan.records.append(book)
                case .failure(let error): plan.errors.append(error)
                }
            }
        } catch let error as CSVReader.Malformed {
            throw AppError.broken("file", "line \(error.line): \(error.message)")
        }
        guard header != nil else { throw AppError.broken("file", "is empty") }
        return plan
    }

    /// The header's column positions by name; throws unless it is a Goodreads export's.
    static func columns(_ header: CSVReader.Record) throws -> (fields: Int, columns: [String: Int]) {
        let columns = Dictionary(header.fields.enumerated().map { ($1.trimmingCharacters(in: .whitespaces), $0) }, uniquingKeysWith: { first, _ in first })
        let missing = required.filter { columns[$0] == nil }
        guard missing.isEmpty else {
            throw AppError.broken("file", "is not a Goodreads export: no \(missing.joined(separator: ", ")) column")
        }
        return (header.fields.count, columns)
    }

    private static func book(_ record: CSVReader.Record, field: (String) -> String) -> Result<ImportRecord, ImportLineError> {
        let title = ImportText.clean(field("Title"), max: 300)
        let authors = ([field("Author")] + field("Additional Authors").split(separator: ",").map(String.init))
            .map { ImportText.clean($0, max: 200) }.filter { !$0.isEmpty }
        guard !title.isEmpty else { return .failure(ImportLineError(line: record.line, message: "has no title")) }
        guard !authors.isEmpty else { return .failure(ImportLineError(line: record.line, message: "has no author")) }
        let isbn = [unwrap(field("ISBN13")), unwrap(field("ISBN"))].first { !$0.isEmpty }
        let bookID = field("Book Id")
        var book = ImportRecord(line: record.line, key: "goodreads:" + (bookID.isEmpty ? "line\(record.line)" : bookID),
                                isbn: isbn, title: title, authors: Array(authors.prefix(20)))
        switch field("Exclusive Shelf").lowercased() {
        case "read": book.reading = "finished"
        case "currently-reading": book.reading = "reading"
        case "to-read": book.reading = "interested"; book.wish = true
        case "did-not-finish", "abandoned", "dnf": book.reading = "abandoned"
        default: break
        }
        book.finishedOn = book.reading == "finished" ? ImportText.day(field("Date Read")) : nil
        book.copies = min(max(Int(field("Owned Copies")) ?? 0, 0), 20)
        book.condition = ImportText.condition(field("Condition"))
        let notes = ImportText.clean(field("Condition Description"), max: 2000)
        book.notes = notes.isEmpty ? nil : notes
        return .success(book)
    }

    /// `="9780140449136"` (Goodreads keeps spreadsheets from eating leading zeros) → the digits.
    static func unwrap(_ value: String) -> String {
        var text = value
        if text.hasPrefix("=") { text.removeFirst() }
        return text.trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
    }
}

enum ImportText {
    /// Control characters out, whitespace runs folded, at most `max` characters.
    static func clean(_ text: String, max: Int) -> String {
        // Most fields are plain printable ASCII with single spaces, which this leaves as it is:
        // filtering them through `CharacterSet` scalar by scalar was a fifth of an import's CPU.
        if isTidyASCII(text) { return text.utf8.count <= max ? text : String(text.prefix(max)) }
        return cleanEveryCharacter(text, max: max)
    }

    /// `clean` without its shortcut.
    static func cleanEveryCharacter(_ text: String, max: Int) -> String {
        let kept = text.unicodeScalars.filter { !CharacterSet.controlCharacters.contains($0) || $0 == "\n" }
        let folded = String(String.UnicodeScalarView(kept)).split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" })
            .joined(separator: " ")
        return String(folded.prefix(max))
    }

    /// Printable ASCII without a space at either end or two in a row: what `clean` keeps whole.
    static func isTidyASCII(_ text: String) -> Bool {
        var previous = UInt8(ascii: " ")
        for byte in text.utf8 {
            guard (0x20...0x7E).contains(byte), byte != UInt8(ascii: " ") || previous != byte else { return false }
            previous = byte
        }
        return previous != UInt8(ascii: " ") || text.isEmpty
    }

    /// Spaces and tabs (`CharacterSet.whitespaces`) off both ends; a field that starts and ends
    /// with another ASCII character, as nearly all do, is returned without Foundation's scan.
    static func trimmed(_ text: String) -> String {
        guard let first = text.utf8.first, let last = text.utf8.last else { return text }
        let edge = { (byte: UInt8) in byte < 0x80 && byte != UInt8(ascii: " ") && byte != UInt8(ascii: "\t") }
        return edge(first) && edge(last) ? text : text.trimmingCharacters(in: .whitespaces)
    }

    /// `2021/05/03`, `2021-05-03` → `2021-05-03`; anything else → nil.
    static func day(_ text: String) -> String? {
        let parts = text.split(whereSeparator: { $0 == "/" || $0 == "-" }).compactMap { Int($0) }
        guard parts.count == 3, (1000...9999).contains(parts[0]), (1...12).contains(parts[1]), (1...31).contains(parts[2]) else { return nil }
        var components = DateComponents()
        components.year = parts[0]; components.month = parts[1]; components.day = parts[2]
        guard components.isValidDate(in: Calendar(identifier: .gregorian)) else { return nil }
        return String(format: "%04d-%02d-%02d", parts[0], parts[1], parts[2])
    }

    static func condition(_ text: String) -> String {
        switch text.lowercased().trimmingCharacters(in: .whitespaces) {
        case "new", "brand new", "mint": "new"
        case "like new", "like_new", "as new", "fine", "near fine": "like_new"
        case "acceptable", "fair", "worn": "fair"
        case "poor", "damaged": "poor"
        default: "good"
        }
    }
}
