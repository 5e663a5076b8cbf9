import Foundation
import Portability

/// The users whose sync scope changed and who are not poked yet, and what the dispatcher knows
/// of the sync horizon without reading it. A user may be poked once every transaction below
/// their change has ended (else the pull the poke prompts could miss it). That is known from a
/// horizon read (`SyncStore.position`), or from a writer's hint (`h <xid>`, migration 0040: no
/// transaction below its id was running when it wrote), which needs no statement: on a loaded
/// machine the read took about a millisecond of the time from a commit to its first event.
struct LivePokes {
    /// User → the newest transaction of theirs not poked yet.
    private(set) var pending: [UUID: UInt64] = [:]
    /// The epoch of the last horizon read, which a token carries: none until one is read.
    private var epoch: String?
    /// Every transaction below this one has ended.
    private var ended: UInt64 = 0

    var isEmpty: Bool { pending.isEmpty }
    var count: Int { pending.count }

    mutating func changed(_ user: UUID, in xid: UInt64) {
        pending[user] = max(pending[user] ?? 0, xid)
    }

    /// `h <xid>`: once it is heard, its transaction has committed.
    mutating func hinted(_ xid: UInt64) {
        ended = max(ended, xid &+ 1)
    }

    /// A first read, or one of another epoch, starts afresh: hints heard before it may be a
    /// former database's, and any true one is below the horizon it read anyway (its transaction
    /// had ended before the read's snapshot).
    mutating func read(_ position: SyncToken) {
        ended = epoch == position.epoch ? max(ended, position.xid) : position.xid
        epoch = position.epoch
    }

    /// Forgets everything: every stream pulls anyway, and after the listener reconnects the
    /// database may be another one (its epoch and transaction ids too).
    mutating func forget() {
        self = LivePokes()
    }

    /// The position a poke may carry without a read, once one has given the epoch. It may lie
    /// below the horizon: a stream resumed from it is poked for a change at or above it, so
    /// nothing is missed, at worst one pull too many.
    var known: SyncToken? {
        epoch.map { SyncToken(epoch: $0, xid: ended, id: 0) }
    }

    /// Takes the users whose changes are below `position`; the others wait for a later one.
    mutating func due(at position: SyncToken) -> [UUID] {
        var due: [UUID] = []
        for (user, xid) in pending where xid < position.xid {
            pending[user] = nil
            due.append(user)
        }
        return due
    }
}
