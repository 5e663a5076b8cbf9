import BookwormCore
import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO

/// Photos of copies: an upload is made anew (`PhotoMaker`) before anything is stored, so its
/// bytes are never kept; an upload stored before that is made anew by `PhotoRemake`, or when
/// it is first asked for, and never served as it came.
package struct PhotosService: Sendable {
    let client: Database
    let copies: CopiesStore
    let photos: PhotosStore
    let maker: PhotoMaker?
    let settings: PhotoMaker.Settings
    let logger: Logger

    /// `maker`: the server's bounded photo threads; without one (the job runner), photos are made
    /// one at a time on the low-priority thread imports are read on.
    package init(client: Database, maker: PhotoMaker?, settings: PhotoMaker.Settings, logger: Logger) {
        self.client = client
        self.copies = CopiesStore(client: client, logger: logger)
        self.photos = PhotosStore(client: client, logger: logger)
        self.maker = maker
        self.settings = settings
        self.logger = logger
    }

    private func make(_ upload: Data) async throws -> MadePhoto {
        if let maker { return try await maker.make(upload) }
        let settings = settings
        return try await LowPriorityThread.background(idle: settings.idle) { try PhotoMaker.makeNow(upload, settings: settings) }
    }

    /// The copy's new photo; the one it replaces goes when no copy shows it any more. The
    /// picture is made before the transaction, so no row is locked while libvips works.
    func set(owner: UUID, copy id: UUID, upload: Data) async throws -> (id: String, photo: MadePhoto) {
        // A statement of its own, not a transaction: under an Idempotency-Key a transaction would
        // begin the request's held one and keep this row locked while libvips works.
        try await client.withConnection { connection in _ = try await copies.lockOwned(id, by: owner, on: connection) }
        let made: MadePhoto
        do { made = try await make(upload) } catch let refusal as PhotoRefusal { throw refusal.appError }
        let photoID = try await client.transaction(logger: logger) { connection in
            let previous = try await copies.lockOwned(id, by: owner, on: connection)
            let photoID = try await photos.put(made, on: connection)
            try await copies.setPhoto(id, photoID: photoID, on: connection)
            if let previous, previous != photoID { try await photos.deleteIfOrphaned(previous, on: connection) }
            return photoID
        }
        return (photoID, made)
    }

    /// One file of a photo. An upload not made anew yet is made now, and the file served from that.
    func file(_ id: String, size: MadePhoto.Size, format: MadePhoto.Format) async throws -> ByteBuffer {
        let notFound = AppError.notFound("No photo with id \(id.prefix(64))")
        guard id.count == 64, id.allSatisfy(\.isHexDigit) else { throw notFound }
        let found = try await photos.file(id, size: size, format: format)
        if let bytes = found.bytes { return bytes }
        let remade: MadePhoto?
        do {
            remade = found.uploaded ? try await remake(id).made : nil
        } catch is PhotoRefusal {
            throw AppError.unavailable("a stored photo could not be made anew this time")
        }
        guard let remade, let bytes = remade.files[size]?[format] else { throw notFound }
        return ByteBuffer(bytes: bytes)
    }

    /// Makes the upload `id` (else the oldest one waiting) anew and moves its copies to the new
    /// photo; an upload that is not a picture we can read is dropped from its copies. The picture
    /// is made outside any transaction (it takes long, and a retried transaction would make it
    /// again). `found` is false when there was none to make.
    @discardableResult
    package func remake(_ id: String? = nil) async throws -> (found: Bool, made: MadePhoto?) {
        guard let upload = try await photos.uploaded(id) else { return (false, nil) }
        var made: MadePhoto?
        do {
            made = try await make(upload.bytes)
        } catch let refusal as PhotoRefusal where refusal.isThePicturesFault {
            // It cannot be served safely as it is, so it goes; any other failure is retried.
            logger.warning("a stored photo cannot be made anew; its copies lose it", metadata: ["photo": .string(upload.id)])
        }
        let photo = made
        try await JobTurn.run {
            try await client.transaction(logger: logger) { connection in
                guard try await photos.lockUploaded(upload.id, on: connection) else { return }
                var new: String?
                if let photo { new = try await photos.put(photo, on: connection) }
                try await photos.replace(upload.id, with: new, on: connection)
            }
        }
        return (true, photo)
    }
}

/// `photos.remake`: uploads stored before photos were made anew, a few at a time, until none
/// is left; then it looks again every hour.
package struct PhotoRemake: JobHandler {
    package let kind = "photos.remake"
    package let recurringKey: String? = "hourly"
    package let runsLong = true
    let service: PhotosService
    let clock: any AppClock
    var batch = 8

    package init(service: PhotosService, clock: any AppClock) {
        self.service = service
        self.clock = clock
    }

    package func firstRun(after now: Date) -> Date { now }

    package func run(_ job: ClaimedJob) async throws -> JobOutcome {
        for _ in 0..<batch {
            guard try await service.remake().found else { return .again(at: clock.now().addingTimeInterval(3600)) }
        }
        return .again(at: clock.now())
    }
}
