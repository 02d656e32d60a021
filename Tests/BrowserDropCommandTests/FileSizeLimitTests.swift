import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

/// Under a file size limit (`RLIMIT_FSIZE`, as systemd's `LimitFSIZE=` sets it), the write that
/// passes the limit raises `SIGXFSZ`, whose default action ends the process: one upload too big
/// for the limit would take every other upload and the kiosk's outbox down with it. The command
/// ignores the signal, so that write fails with `EFBIG` instead.
@Suite("A file size limit")
struct FileSizeLimitTests {
  @Test("An upload past RLIMIT_FSIZE is answered write_failed, and the command keeps serving")
  func uploadPastTheLimit() async throws {
    let folder = try TemporaryFolder()
    let command = try CommandProcess(
      [
        "--json", "--port", "0", "--bind", "127.0.0.1", "--staging",
        folder.path("staging").path,
      ],
      launcher: ["/usr/bin/prlimit", "--fsize=65536", "--"])
    defer { Task { await command.stop() } }
    let port = try await command.listeningPort()
    let big = try folder.makeFile("src/big.bin", size: 200_000, seed: 1)
    #expect(try await Uploader.upload(big, as: "big.bin", port: port) == 500)
    let failed = try await command.waitForEvent("uploadFailed")
    #expect("\(failed)".contains("File too large"), "\(failed)")
    let small = try folder.makeFile("src/small.bin", size: 1000, seed: 2)
    #expect(try await Uploader.upload(small, as: "small.bin", port: port) == 201)
    command.send(SIGINT)
    #expect(try await command.waitForExit() == 0)
  }
}
