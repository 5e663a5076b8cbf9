import BookwormCore
import Catalog
import Discovery
import Foundation

package enum ReadingState: String, CaseIterable, Sendable {
    case interested, reading, finished, abandoned
}

/// `PUT /v1/me/readings/{book_id}`: the whole reading (absent optional fields are cleared).
package struct PutReadingBody: StrictBody {
    let state: String
    let `private`: Bool?
    let closingRemark: String?
    let startedOn: String?
    let finishedOn: String?

    package enum CodingKeys: String, CodingKey, CaseIterable {
        case state, `private`
        case closingRemark = "closing_remark", startedOn = "started_on", finishedOn = "finished_on"
    }
}

/// `POST /v1/me/readings`: the book by ISBN (title and authors needed only for a new book), then as PUT.
package struct PostReadingBody: StrictBody {
    let isbn: String
    let title: String?
    let authors: [String]?
    let state: String
    let `private`: Bool?
    let closingRemark: String?
    let startedOn: String?
    let finishedOn: String?

    package enum CodingKeys: String, CodingKey, CaseIterable {
        case isbn, title, authors, state, `private`
        case closingRemark = "closing_remark", startedOn = "started_on", finishedOn = "finished_on"
    }

    var reading: PutReadingBody {
        PutReadingBody(state: state, private: `private`, closingRemark: closingRemark, startedOn: startedOn, finishedOn: finishedOn)
    }
}

/// A validated reading.
package struct ReadingInput: Sendable {
    let state: ReadingState
    let isPrivate: Bool
    let closingRemark: String?
    let startedOn: String?
    let finishedOn: String?
}

package struct ReadingView: Encodable, Sendable {
    let book: BookSummary
    let state: String
    let isPrivate: Bool
    let closingRemark: String?
    let startedOn: String?
    let finishedOn: String?
    let createdAt: Date
    let updatedAt: Date
    let sortMicros: Int64

    var cursor: Cursor { Cursor(micros: sortMicros, id: book.id) }

    enum CodingKeys: String, CodingKey {
        case book, state
        case isPrivate = "private", closingRemark = "closing_remark", startedOn = "started_on", finishedOn = "finished_on"
        case createdAt = "created_at", updatedAt = "updated_at"
    }

    package func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(book, forKey: .book)
        try c.encode(state, forKey: .state)
        try c.encode(isPrivate, forKey: .isPrivate)
        try c.encode(closingRemark, forKey: .closingRemark)
        try c.encode(startedOn, forKey: .startedOn)
        try c.encode(finishedOn, forKey: .finishedOn)
        try c.encode(createdAt, forKey: .createdAt)
        try c.encode(updatedAt, forKey: .updatedAt)
    }
}

/// Field rules for readings (API.md, Shelf): 400 for the schema's, 422 for the rest.
enum ReadingValidation {
    static func reading(_ body: PutReadingBody) throws -> ReadingInput {
        var errors: [FieldError] = []
        let state = ReadingState(rawValue: body.state)
        if state == nil { errors.append(FieldError("state", "must be one of interested, reading, finished, abandoned")) }
        let remark = try collectFieldErrors(&errors) {
            try body.closingRemark.map { try FeedValidation.body($0, field: "closing_remark", maxLength: 2000) }
        } ?? nil
        let started = try collectFieldErrors(&errors) { try body.startedOn.map { try TradeValidation.date($0, field: "started_on") } } ?? nil
        let finished = try collectFieldErrors(&errors) { try body.finishedOn.map { try TradeValidation.date($0, field: "finished_on") } } ?? nil
        guard errors.isEmpty, let state else { throw AppError.validation(errors) }
        if let started, let finished, finished < started {
            throw AppError.broken("finished_on", "must not be before started_on")
        }
        return ReadingInput(state: state, isPrivate: body.private ?? false, closingRemark: remark,
                            startedOn: started.map(TradesStore.dateString), finishedOn: finished.map(TradesStore.dateString))
    }
}
