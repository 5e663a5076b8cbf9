import AsyncHTTPClient
import BookwormCore
import Foundation
import JWTKit
import Logging
import Mail
import NIOCore
import PostgresNIO

/// The push benchmark's data: one user signed in on `devices` phones, and a push to them all.
enum PushBenchmarkSQL {
    static let user = UUID(uuidString: "00000000-0000-4000-8000-00000000b054") ?? UUID()
    static let session = UUID(uuidString: "00000000-0000-4000-8000-00000000b055") ?? UUID()

    static func prepare(devices: Int, client: Database, logger: Logger) async throws {
        try await clear(client: client, logger: logger)
        try await client.query("DELETE FROM users WHERE id = \(user)", logger: logger)
        try await client.query("""
            INSERT INTO users (id, email, email_normalized, username, password_hash)
            VALUES (\(user), 'push-bench@bench.invalid', 'push-bench@bench.invalid', 'push_bench', 'x')
            """, logger: logger)
        try await client.query("""
            INSERT INTO sessions (id, user_id, token_hash, idle_expires_at, absolute_expires_at)
            VALUES (\(session), \(user), '\\x00'::bytea, now() + interval '1 day', now() + interval '1 day')
            """, logger: logger)
        try await client.query("""
            INSERT INTO devices (user_id, session_id, platform, environment, token, created_at)
            SELECT \(user), \(session), 'apns', 'production', md5(i::text) || md5((i + 1)::text), now()
            FROM generate_series(1, \(devices)) AS i
            """, logger: logger)
    }

    /// One push to every device, as a trade would queue it.
    static func enqueue(settings: PushSettings, client: Database, logger: Logger) async throws {
        let queue = PushQueue(client: client, settings: settings, clock: SystemClock(), logger: logger)
        _ = try await client.transaction(logger: logger) { connection in
            try await queue.enqueue([PushMessage(userID: user, category: "trades", title: "reader_42 asks for \"Middlemarch\"",
                                                 body: "reader_42 would like \"Middlemarch\" as a gift. Open Bookworm to see the trade.",
                                                 kind: "trade", objectID: user, collapseID: "trade-\(user.apiString)")], on: connection)
        }
    }

    static func clear(client: Database, logger: Logger) async throws {
        try await client.query("DELETE FROM jobs WHERE kind = 'push'", logger: logger)
    }

    /// The queued pushes as the requests the worker would send them, signed once.
    static func requests(apns: APNsSettings, client: Database, logger: Logger) async throws -> [HTTPClientRequest] {
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: apns.key, kid: JWKIdentifier(string: apns.keyID))
        let jwt = try await keys.sign(APNsClaims(iss: IssuerClaim(value: apns.teamID), iat: IssuedAtClaim(value: Date())),
                                      kid: JWKIdentifier(string: apns.keyID))
        let rows = try await client.query("""
            SELECT d.token, j.payload->>'title', j.payload->>'body', j.payload->>'kind', j.payload->>'id', j.payload->>'collapse'
            FROM jobs j JOIN devices d ON d.id = (j.payload->>'device')::uuid WHERE j.kind = 'push'
            """, logger: logger)
        var requests: [HTTPClientRequest] = []
        for try await (token, title, body, kind, id, collapse) in rows.decode((String, String, String, String, String, String).self) {
            var request = HTTPClientRequest(url: "\(apns.url)/3/device/\(token)")
            request.method = .POST
            request.headers.add(name: "authorization", value: "bearer \(jwt)")
            request.headers.add(name: "apns-topic", value: apns.topic)
            request.headers.add(name: "apns-push-type", value: "alert")
            request.headers.add(name: "apns-priority", value: "10")
            request.headers.add(name: "content-type", value: "application/json")
            request.headers.add(name: "apns-collapse-id", value: collapse)
            let payload: [String: Any] = ["aps": ["alert": ["title": title, "body": body], "sound": "default"], "data": ["kind": kind, "id": id]]
            request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys])))
            requests.append(request)
        }
        return requests
    }
}
