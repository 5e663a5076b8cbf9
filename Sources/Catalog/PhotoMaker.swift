import BookwormCore
import CVips
import Foundation
import Metrics
import NIOPosix
import ServiceLifecycle
import Synchronization

/// One photo as it is stored and served: three sizes, each as JPEG and WebP, written anew by
/// libvips from the decoded pixels, so nothing of the upload's metadata survives.
package struct MadePhoto: Sendable {
    package enum Size: String, CaseIterable, Sendable { case full, card, thumb }
    package enum Format: String, CaseIterable, Sendable { case jpeg, webp }

    package let width: Int
    package let height: Int
    package let blurhash: String
    /// Keyed by size and format.
    package let files: [Size: [Format: Data]]

    /// Content-addressed: the same picture made the same way has the same id. Hashed once, where
    /// the photo is made (a photo thread), not where it is stored (the request's event loop).
    package let id: String

    init(width: Int, height: Int, blurhash: String, files: [Size: [Format: Data]]) {
        (self.width, self.height, self.blurhash, self.files) = (width, height, blurhash, files)
        id = Digest.hex(Digest.sha256(files[.full]?[.jpeg] ?? Data()))
    }
}

/// Makes photos on threads of its own, at most `concurrency` at once and `queueLimit` waiting
/// (503 past that), as password hashing does: an image's CPU never lands on an event loop.
package final class PhotoMaker: Service, Sendable {
    package struct Settings: Sendable {
        package var concurrency: Int
        package var queueLimit: Int
        /// More pixels than this (read from the header) is 422 `image_too_large`.
        package var maxPixels = 40_000_000
        /// A decode that has used this much CPU is stopped (422 `image_unreadable`). CPU, not the
        /// wall clock: photo threads are `SCHED_IDLE`, and a busy machine must not fail a good picture.
        package var deadlineSeconds = 20.0
        /// Long edges of full, card and thumb, in the order libvips makes them (each from the one before).
        package var edges: [Int32] = [1600, 480, 160]
        package var jpegQuality: Int32 = 82
        package var webpQuality: Int32 = 80
        /// Photo threads (and libvips' own) run in `SCHED_IDLE`. Tests turn it off: a full run
        /// keeps both cores busy for minutes, and a `SCHED_IDLE` thread gets next to none of them.
        package var idle = true

        package init(concurrency: Int = ProcessInfo.processInfo.activeProcessorCount, queueLimit: Int? = nil) {
            self.concurrency = max(1, concurrency)
            self.queueLimit = queueLimit ?? 2 * max(1, concurrency)
        }
    }

    package let settings: Settings
    private let pool: NIOThreadPool
    private let admission: Admission
    /// Photos being made or waiting.
    package var admittedCount: Int { admission.count }

    /// libvips starts with the first photo, on a photo thread (see `make`).
    package init(settings: Settings) throws {
        self.settings = settings
        self.admission = Admission(limit: settings.concurrency + settings.queueLimit, shedMetric: "bookworm_photos_shed_total")
        self.pool = NIOThreadPool(numberOfThreads: settings.concurrency)
        self.pool.start()
    }

    /// Starts libvips on a photo thread (so its own threads take that thread's policy), and
    /// fails the server at once if it cannot.
    package func run() async throws {
        let idle = settings.idle
        let started = try await pool.runIfActive {
            if idle { LowPriorityThread.idleOnce() }
            return bw_vips_start()
        }
        guard started == 0 else { throw AppError.unavailable("libvips could not start") }
        try? await gracefulShutdown()
        try await pool.shutdownGracefully()
    }

    /// The photo made from `upload`, or the error the upload deserves.
    package func make(_ upload: Data) async throws -> MadePhoto {
        let settings = settings
        return try await admission.run {
            try await pool.runIfActive {
                // A photo waits behind requests, never the other way round; libvips' own threads,
                // started from here, take the same policy (GLib's pools copy their creator's).
                if settings.idle { LowPriorityThread.idleOnce() }
                return try Self.makeNow(upload, settings: settings)
            }
        }
    }

    static func makeNow(_ upload: Data, settings: Settings) throws -> MadePhoto {
        var out = bw_photo()
        let code = upload.withUnsafeBytes { bytes in
            settings.edges.withUnsafeBufferPointer { edges in
                bw_photo_make(bytes.baseAddress, bytes.count, Double(settings.maxPixels), settings.deadlineSeconds, edges.baseAddress,
                              settings.jpegQuality, settings.webpQuality, &out)
            }
        }
        defer { bw_photo_free(&out) }
        switch Int(code) {
        case BW_PHOTO_OK: break
        case BW_PHOTO_UNSUPPORTED: throw PhotoRefusal.unsupported
        case BW_PHOTO_TOO_LARGE: throw PhotoRefusal.tooLarge(settings.maxPixels)
        case BW_PHOTO_UNREADABLE: throw PhotoRefusal.unreadable
        case BW_PHOTO_TIMED_OUT: throw PhotoRefusal.timedOut(settings.deadlineSeconds)
        default: throw PhotoRefusal.failed("libvips could not write a photo: \(Self.error(of: &out))")
        }
        var files: [MadePhoto.Size: [MadePhoto.Format: Data]] = [:]
        let jpegs = [out.jpeg.0, out.jpeg.1, out.jpeg.2], jpegLengths = [out.jpeg_length.0, out.jpeg_length.1, out.jpeg_length.2]
        let webps = [out.webp.0, out.webp.1, out.webp.2], webpLengths = [out.webp_length.0, out.webp_length.1, out.webp_length.2]
        for (index, size) in [MadePhoto.Size.full, .card, .thumb].enumerated() {
            guard let jpeg = jpegs[index], let webp = webps[index] else { throw PhotoRefusal.failed("libvips wrote no \(size) photo") }
            files[size] = [.jpeg: Data(bytes: jpeg, count: jpegLengths[index]), .webp: WebPContainer.withoutMetadata(Data(bytes: webp, count: webpLengths[index]))]
        }
        guard let pixels = out.thumb_rgb else { throw PhotoRefusal.failed("libvips gave no thumbnail pixels") }
        let width = Int(out.thumb_width), height = Int(out.thumb_height)
        let blurhash = Blurhash.encode(UnsafeBufferPointer(start: pixels, count: width * height * 3), width: width, height: height)
        return MadePhoto(width: Int(out.width), height: Int(out.height), blurhash: blurhash, files: files)
    }

    private static func error(of photo: inout bw_photo) -> String {
        withUnsafeBytes(of: &photo.error) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }
}

/// Why a picture was not made. The first three are the picture's own doing (a stored upload
/// like that is dropped); a decode out of time or libvips failing may go another time.
package enum PhotoRefusal: Error, Sendable {
    case unsupported, tooLarge(Int), unreadable, timedOut(Double), failed(String)

    var isThePicturesFault: Bool {
        switch self {
        case .unsupported, .tooLarge, .unreadable: true
        case .timedOut, .failed: false
        }
    }

    /// What the uploader is told.
    var appError: AppError {
        switch self {
        case .unsupported: .unsupportedMediaType("The body is not a JPEG, PNG, WebP or HEIF picture")
        case .tooLarge(let pixels):
            .unprocessableBecause(code: "image_too_large", detail: "The picture has more than \(pixels) pixels", field: nil)
        case .unreadable: .unprocessableBecause(code: "image_unreadable", detail: "The picture cannot be read: it is damaged", field: nil)
        case .timedOut(let seconds):
            .unprocessableBecause(code: "image_unreadable", detail: "The picture took more than \(Int(seconds)) s of work to read", field: nil)
        case .failed(let reason): .unavailable(reason)
        }
    }
}
