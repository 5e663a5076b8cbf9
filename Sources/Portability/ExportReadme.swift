import Foundation

extension ExportService {
    static func readme(counts: [String: Int], photos: Int, devices: Int, at date: Date) -> String {
        func count(_ kind: String) -> Int { counts[kind] ?? 0 }
        return """
            Your Bookworm data, exported \(ISO8601DateFormatter().string(from: date))
            ================================================================

            Every file is JSON (UTF-8), each object in the shape the API returns it to you.

            profile.json   your account: username, email, display name, bio, alert and push preferences
            devices.json   \(devices) phones signed in for push: provider, environment, token, when
            pins.json      \(count("pin")) pins, with their exact points (only you ever see those) and the public
                           points others see
            copies.json    \(count("copy")) copies you own: book, condition, status, notes, pin, photo
            readings.json  \(count("reading")) readings on your shelf: state, dates, closing remark, private or not
            wishes.json    \(count("wish")) wishes: book, any edition, radius, pin, minimum condition
            trades.json    \(count("trade")) trades you took part in, with their events
            posts.json     \(count("post")) posts you wrote
            blocks.json    \(count("block")) users you block
            photos/        \(photos) photos of your copies (full size, JPEG), named by the SHA-256 of their bytes

            To move to a new account, sign in there and send this zip unchanged to
            POST /v1/me/imports with Content-Type: application/zip. Your pins, copies, readings and
            wishes come back; importing it twice creates nothing twice. Trades, posts and blocks
            involve other people and are here for your records only.
            """
    }
}
