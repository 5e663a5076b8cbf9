import BookwormCore
import Catalog
import Exchange
import Discovery
import Foundation
import Logging
import NIOCore
import ZIPFoundation

/// Exports: asked for at most once a day, built by a job into a zip (one JSON file per kind of
/// object, exact pin points included since it is the owner's own data; the photos; a README),
/// downloadable by its owner for 72 hours.
package struct ExportService: Sendable {
    let store: ExportStore
    let owned: OwnedViews
    let photos: PhotosService
    let clock: any AppClock
    let logger: Logger
    static let keep: TimeInterval = 72 * 3600
    static let remakesPerExport = 50

    package init(client: Database, readings: ReadingsService, wishes: WishesService, trades: TradesService, photos: PhotosService,
                 clock: any AppClock, logger: Logger) {
        self.store = ExportStore(client: client, logger: logger)
        self.owned = OwnedViews(client: client, readings: readings, wishes: wishes, trades: trades, logger: logger)
        self.photos = photos
        self.clock = clock
        self.logger = logger
    }

    func start(user: UUID) async throws -> ExportView {
        let now = clock.now()
        let created = try await store.client.transaction(logger: logger) { try await store.create(user: user, now: now, on: $0) }
        switch created {
        case .created(let id): return try await view(id, user: user)
        case .tooSoon(let last):
            throw AppError.throttled(retryAfterSeconds: Int(last.addingTimeInterval(86400).timeIntervalSince(now).rounded(FloatingPointRoundingRule.up)))
        }
    }

    func view(_ id: UUID, user: UUID) async throws -> ExportView {
        guard let view = try await store.view(id, user: user) else { throw AppError.notFound("No export with id \(id.apiString)") }
        return view
    }

    func archive(_ id: UUID, user: UUID) async throws -> ByteBuffer {
        switch try await store.archive(id, user: user, now: clock.now()) {
        case .ready(let bytes): return bytes
        case .expired: throw AppError.gone(code: "export_expired", detail: "This export has expired: ask for a new one", field: nil)
        case .missing: throw AppError.notFound("No finished export with id \(id.apiString)")
        }
    }

    package func dropExpired() async throws {
        try await store.dropExpired(now: clock.now())
    }

    func build(_ id: UUID) async throws {
        guard let user = try await store.claim(id) else { return }
        // Before anything is read: an upload stored before photos were made anew is made now (as
        // a viewer asking for it would have it made), and its copies point at what it became, so
        // copies.json and photos/ agree and the upload as it came never leaves. At most
        // `remakesPerExport`, well inside the job's lease; the rest are left out, as unshown.
        for waiting in try await store.uploadsWaiting(of: user, limit: Self.remakesPerExport) {
            do { try await photos.remake(waiting) } catch let refusal as PhotoRefusal {
                logger.warning("a photo could not be made anew for an export; it is left out",
                               metadata: ["photo": .string(waiting), "error": .string(String(describing: refusal))])
            }
        }
        // Made photos stored one turn each (`PhotosService.remake`); the archive is one more.
        let data = try await JobTurn.run { try await archive(of: user) }
        try await store.finish(id, archive: data, now: clock.now(), keep: Self.keep)
        logger.info("export built", metadata: ["export_id": .string(id.apiString), "bytes": .stringConvertible(data.count)])
    }

    private func archive(of user: UUID) async throws -> Data {
        let archive = try Archive(accessMode: .create)
        var counts: [String: Int] = [:]
        let objects = try await store.objects(of: user)
        let encoder = JSONEncoder.api
        encoder.outputFormatting.insert(.prettyPrinted)
        for kind in OwnedViews.kinds {
            var views: [any Encodable & Sendable] = []
            for batch in (objects[kind] ?? []).chunked(1000) {
                let found = try await owned.views(kind: kind, ids: Array(batch), user: user)
                views += batch.compactMap { found[$0] }
            }
            counts[kind] = views.count
            try add(archive, Self.files[kind] ?? "\(kind).json", try encoder.encode(views.map(AnyView.init)))
        }
        try add(archive, "profile.json", try encoder.encode(try await store.profile(of: user)))
        let devices = try await store.devices(of: user)
        try add(archive, "devices.json", try encoder.encode(devices))
        let files = try await store.photos(of: user)
        for photo in files {
            try add(archive, "photos/\(photo.id).jpg", Data(photo.bytes.readableBytesView))
        }
        try add(archive, "README.txt", Data(Self.readme(counts: counts, photos: files.count, devices: devices.count, at: clock.now()).utf8))
        guard let data = archive.data else { throw AppError.unavailable("the export archive has no bytes") }
        return data
    }

    private func add(_ archive: Archive, _ path: String, _ data: Data) throws {
        try archive.addEntry(with: path, type: .file, uncompressedSize: Int64(data.count), modificationDate: clock.now(),
                             compressionMethod: .deflate) { position, size in
            data.subdata(in: Int(position)..<Int(position) + size)
        }
    }

    static let files = ["pin": "pins.json", "copy": "copies.json", "reading": "readings.json", "wish": "wishes.json",
                        "trade": "trades.json", "post": "posts.json", "block": "blocks.json"]
}

/// Type-erases a view for encoding in an array.
private struct AnyView: Encodable {
    let view: any Encodable & Sendable
    init(_ view: any Encodable & Sendable) { self.view = view }
    func encode(to encoder: any Encoder) throws { try view.encode(to: encoder) }
}

extension Array {
    func chunked(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
