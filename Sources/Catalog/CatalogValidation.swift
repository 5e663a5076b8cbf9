import Accounts
import BookwormCore
import Foundation

/// The API's rules for catalog fields (API.md, Catalog).
package enum CatalogValidation {
    /// `now` bounds the publication year (next year at the latest).
    package static func book(isbn: String?, title: String?, authors: [String]?, publisher: String?,
                     publishedYear: Int?, language: String?, now: Date) throws -> NewBook {
        var errors: [FieldError] = []
        var broken: [FieldError] = []
        var parsedISBN: ISBN?
        if let isbn, !isbn.allSatisfy({ $0 == " " }) {
            do { parsedISBN = try ISBN(isbn) } catch {
                if error == .shape { errors.append(FieldError("isbn", error.message)) } else { broken.append(FieldError("isbn", error.message)) }
            }
        }
        let cleanTitle = (try? AccountValidation.text(title, field: "title", maxLength: 300, allowNewlines: false)) ?? nil
        if cleanTitle == nil { errors.append(FieldError("title", "is required: 1 to 300 characters, no control characters")) }
        let cleanAuthors = (authors ?? []).compactMap { try? AccountValidation.text($0, field: "authors", maxLength: 200, allowNewlines: false) }
        if cleanAuthors.isEmpty || cleanAuthors.count != (authors ?? []).count || cleanAuthors.count > 20 {
            errors.append(FieldError("authors", "must be a list of 1 to 20 names, each 1 to 200 characters"))
        }
        let cleanPublisher = try collectFieldErrors(&errors) { try AccountValidation.text(publisher, field: "publisher", maxLength: 200, allowNewlines: false) } ?? nil
        let currentYear = Calendar(identifier: .gregorian).component(.year, from: now)
        if let year = publishedYear, !(0...9999).contains(year) {
            errors.append(FieldError("published_year", "must be between 0 and 9999"))
        } else if let year = publishedYear, year > currentYear + 1 {
            broken.append(FieldError("published_year", "must be at most \(currentYear + 1)"))
        }
        var cleanLanguage: String?
        if let language {
            let value = language.lowercased()
            let valid = (2...35).contains(value.count) && value.allSatisfy { ($0.isASCII && $0.isLetter) || $0 == "-" }
            if valid { cleanLanguage = value } else { errors.append(FieldError("language", "must be a language tag such as en or pt-br")) }
        }
        guard errors.isEmpty, let cleanTitle else { throw AppError.validation(errors) }
        guard broken.isEmpty else { throw AppError.rule(broken) }
        return NewBook(isbn: parsedISBN, title: cleanTitle, authors: cleanAuthors, publisher: cleanPublisher,
                       publishedYear: publishedYear, language: cleanLanguage)
    }

    /// An ISBN given alone: a malformed one is a 400, a wrong check digit or prefix a 422.
    package static func isbn(_ raw: String) throws -> ISBN {
        do { return try ISBN(raw) } catch {
            throw error == .shape ? AppError.invalid("isbn", error.message) : AppError.broken("isbn", error.message)
        }
    }

    /// An `?isbn=` filter, normalised to ISBN-13.
    package static func isbnFilter(_ raw: String) throws -> String {
        do {
            return try ISBN(raw).isbn13
        } catch {
            if error == .shape { throw AppError.invalid("isbn", error.message) }
            throw AppError.broken("isbn", error.message)
        }
    }

    package static func condition(_ raw: String) throws -> CopyCondition {
        guard let value = CopyCondition(rawValue: raw) else {
            throw AppError.invalid("condition", "must be one of \(CopyCondition.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return value
    }

    package static func status(_ raw: String) throws -> CopyStatus {
        guard let value = CopyStatus(rawValue: raw) else {
            throw AppError.invalid("status", "must be one of \(CopyStatus.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return value
    }

    static func notes(_ raw: String?) throws -> String? {
        try AccountValidation.text(raw, field: "notes", maxLength: 2000, allowNewlines: true)
    }

    /// Search words for `q`: letters and digits only, at most 8 words, so any text typed
    /// in a search box is a valid query.
    package static func searchWords(_ raw: String?) -> [String]? {
        guard let raw else { return nil }
        let words = raw.split(whereSeparator: { !($0.isLetter || $0.isNumber) }).map(String.init).filter { !$0.isEmpty }
        return words.isEmpty ? nil : Array(words.prefix(8))
    }
}
