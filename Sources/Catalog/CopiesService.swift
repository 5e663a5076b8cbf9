import Accounts
import BookwormCore
import Foundation
import Logging
import NIOCore
import Places
import PostgresNIO

/// Which book a new copy is of: one already in the catalogue, or one found or created from
/// the details the owner typed.
package enum BookChoice: Sendable {
    case existing(UUID)
    case described(NewBook)
    /// Only an ISBN (a scanned barcode): the catalogue's book with it, which must exist.
    case isbn(ISBN)
}

/// The copy use cases: each write is one transaction that checks ownership under a row lock
/// before changing anything, so a check and the change it guards cannot be separated.
package struct CopiesService: Sendable {
    let client: Database
    let books: BooksStore
    let copies: CopiesStore
    let photos: PhotosStore
    let pins: PinsStore
    let logger: Logger

    /// `frequencies`: for the library's service, so that searches run prepared (`LibrarySearchSQL`).
    package init(client: Database, logger: Logger, frequencies: SearchFrequencies? = nil) {
        self.client = client
        self.books = BooksStore(client: client, logger: logger)
        self.copies = CopiesStore(client: client, logger: logger, frequencies: frequencies)
        self.photos = PhotosStore(client: client, logger: logger)
        self.pins = PinsStore(client: client, logger: logger)
        self.logger = logger
    }

    package func list(_ filter: CopyFilter, page: PageRequest) async throws -> Page<CopyView> {
        page.page(try await copies.list(filter, limit: page.limit + 1, after: page.after), cursor: \.cursor, item: { $0 })
    }

    /// Withdrawn copies are the owner's business only; others are told there is no such copy,
    /// as they are of a copy hidden by reports or of a suspended owner.
    func visible(_ id: UUID, viewer: UUID?) async throws -> CopyView {
        let notFound = AppError.notFound("No copy with id \(id.apiString)")
        guard let (copy, shown) = try await copies.detail(id), copy.status != CopyStatus.withdrawn.rawValue else { throw notFound }
        guard copy.owner.id == viewer || shown else { throw notFound }
        return copy
    }

    package func availableCount(ownerID: UUID) async throws -> Int {
        try await copies.availableCount(ownerID: ownerID)
    }

    package func create(id: UUID? = nil, owner: UUID, book: BookChoice, condition: CopyCondition, notes: String?, pinID: UUID?)
        async throws -> Made<CopyView>
    {
        try await client.transaction(logger: logger) { connection in
            if let id, let mine = try await copies.clientMade(id, ownerID: owner, book: book, condition: condition, notes: notes,
                                                               pinID: pinID, on: connection) {
                return Made(mine, isNew: false)
            }
            let bookID: UUID
            switch book {
            case .existing(let id): bookID = id
            case .described(let newBook): bookID = try await books.findOrCreate(newBook, on: connection).0.id
            case .isbn(let isbn):
                guard let id = try await books.id(isbn13: isbn.isbn13, on: connection) else {
                    throw AppError.unprocessableBecause(code: "unknown_isbn", detail: "No book in the catalogue has this ISBN yet: describe it with title and authors",
                                                        field: "isbn")
                }
                bookID = id
            }
            try await requireOwnPin(pinID, owner: owner, on: connection)
            return Made(try await copies.create(id: id, ownerID: owner, bookID: bookID, condition: condition, notes: notes,
                                                pinID: pinID, on: connection), isNew: true)
        }
    }

    package func update(owner: UUID, id: UUID, condition: CopyCondition?, status: CopyStatus?, notes: FieldUpdate<String>,
                        pinID: FieldUpdate<UUID>) async throws -> CopyView {
        let copy = try await client.transaction(logger: logger) { connection in
            _ = try await copies.lockOwned(id, by: owner, on: connection)
            if let status { try await requireStatusChange(id, to: status, on: connection) }
            if case .set(let pin) = pinID { try await requireOwnPin(pin, owner: owner, on: connection) }
            try await copies.update(id, condition: condition, status: status, notes: notes, pinID: pinID, on: connection)
            return try await copies.get(id, connection: connection)
        }
        guard let copy else { throw AppError.notFound("No copy with id \(id.apiString)") }
        return copy
    }

    /// The copy's photo goes with it unless another copy shows the same picture.
    package func delete(owner: UUID, id: UUID) async throws {
        try await client.transaction(logger: logger) { connection in
            let photo = try await copies.lockOwned(id, by: owner, on: connection)
            let hold = try await copies.tradeHold(id, on: connection)
            guard hold.openTrades == 0, !(CopyStatus(rawValue: hold.status)?.isTradeHeld ?? false) else {
                throw AppError.conflict(code: "copy_in_trade", detail: "The copy is in an open trade; settle the trade first", field: nil)
            }
            try await copies.delete(id, on: connection)
            if let photo { try await photos.deleteIfOrphaned(photo, on: connection) }
        }
    }

    /// Trades alone reserve and lend; a copy someone has asked for keeps its status until the
    /// requests are answered.
    private func requireStatusChange(_ id: UUID, to status: CopyStatus, on connection: PostgresConnection) async throws {
        guard !status.isTradeHeld else {
            throw AppError.conflict(code: "status_set_by_trades", detail: "\(status.rawValue) is set by trades only", field: "status")
        }
        let hold = try await copies.tradeHold(id, on: connection)
        guard hold.status != status.rawValue else { return }
        guard !(CopyStatus(rawValue: hold.status)?.isTradeHeld ?? false) else {
            throw AppError.conflict(code: "copy_in_trade", detail: "The copy is \(hold.status) by a trade", field: "status")
        }
        guard hold.openTrades == 0 else {
            throw AppError.conflict(code: "copy_in_trade", detail: "Answer the open requests for this copy first", field: "status")
        }
    }

    /// A copy may only be placed on one of its owner's own pins.
    private func requireOwnPin(_ pinID: UUID?, owner: UUID, on connection: PostgresConnection) async throws {
        guard let pinID else { return }
        guard try await pins.isOwned(pinID, by: owner, on: connection) else {
            throw AppError.unprocessable("pin_id: \(pinID.apiString) is not one of your pins")
        }
    }
}
