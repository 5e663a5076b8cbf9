import Foundation
import Testing
@testable import BookwormCore
@testable import BookwormTestSupport
import CVipsProbes
@testable import Catalog

/// Where libvips 8.14 does not do what it says, and the project works around it. When one of
/// these fails, libvips is fixed and its workaround can go.
@Suite struct LibvipsWorkaroundTests {
    /// `thumbnail_buffer` ignores its own `fail_on` (libvips/libvips#5195), so the photo maker
    /// hands it to the loader as an option as well (`decode` in bookworm_vips.c).
    @Test func thumbnailBufferStillIgnoresItsFailOn() throws {
        let jpeg = try TestPictures.phoneJPEG()
        let half = jpeg.prefix(jpeg.count / 2)
        #expect(half.withUnsafeBytes { bw_probe_thumbnail_fail_on_is_ignored($0.baseAddress, $0.count) } == 1)
    }

    /// webpsave writes an EXIF chunk even with `strip` and no metadata on the image, so the
    /// photo maker takes the metadata chunks out itself (`WebPContainer`).
    @Test func webpsaveStillWritesEXIFWhenStripping() throws {
        var length = 0
        let pointer = try #require(bw_probe_stripped_webp(&length))
        defer { bw_probe_free(pointer) }
        let webp = Data(bytes: pointer, count: length)
        #expect(WebPContainer.chunks(webp).contains("EXIF"))
        let cleaned = WebPContainer.withoutMetadata(webp)
        #expect(WebPContainer.chunks(cleaned) == WebPContainer.chunks(webp).filter { $0 != "EXIF" })
        #expect(try TestPictures.size(cleaned, ext: "webp") == (16, 16))
    }
}
