import FakePush
import Foundation

/// `swift run fake-push [FILE]`: a fake APNs and FCM on this machine, to try push locally. Writes
/// the variables that point `bookworm` at it to FILE (default `.bookworm/fake-push.env`) and
/// prints every push it accepts.
/// A line at once, also when the output is a pipe or a file (print's output waits in a buffer there).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let file = CommandLine.arguments.dropFirst().first ?? ".bookworm/fake-push.env"
let fake = try await FakePushProvider.start()
var environment = fake.environment
environment["BOOKWORM_PUSH_TIMEOUT_SECONDS"] = nil
let lines = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
try FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
say("fake APNs and FCM at \(fake.url); the variables for bookworm are in \(file)")
say("waiting for pushes (^C to stop)…")
for await push in fake.pushes {
    say("\(push.provider) push to \(push.token.prefix(12))…: kind=\(push.kind) id=\(push.id) title=\(push.title.debugDescription)")
}
