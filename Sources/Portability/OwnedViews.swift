import Accounts
import BookwormCore
import Catalog
import Discovery
import Exchange
import Foundation
import Logging
import Places

/// Everything a user owns, each object as its own GET shows it to them: what sync pages and
/// exports are made of. Each kind is read in one statement for a whole batch of ids.
struct OwnedViews: Sendable {
    static let kinds = ["pin", "copy", "reading", "wish", "trade", "post", "block"]

    let copies: CopiesStore
    let pins: PinsStore
    let readings: ReadingsService
    let wishes: WishesService
    let trades: TradesService
    let posts: PostsStore
    let blocks: BlocksStore

    init(client: Database, readings: ReadingsService, wishes: WishesService, trades: TradesService, logger: Logger) {
        self.copies = CopiesStore(client: client, logger: logger)
        self.pins = PinsStore(client: client, logger: logger)
        self.readings = readings
        self.wishes = wishes
        self.trades = trades
        self.posts = PostsStore(client: client, logger: logger)
        self.blocks = BlocksStore(client: client, logger: logger)
    }

    func views(kind: String, ids: [UUID], user: UUID) async throws -> [UUID: any Encodable & Sendable] {
        switch kind {
        case "copy": try await copies.owned(ids, owner: user)
        case "pin": try await pins.owned(ids, ownerID: user)
        case "reading": try await readings.owned(books: ids, user: user)
        case "wish": try await wishes.owned(ids, user: user)
        case "trade": try await trades.views(ids, viewer: user)
        case "post": try await posts.authored(ids, author: user)
        case "block": try await blocks.blocked(ids, by: user)
        default: [:]
        }
    }
}
