import BrowserDropSystem
import Testing

@testable import BrowserDropForwarding

/// libsmbclient is opened with dlopen by the first SMB delivery (SMBLibrary); when it can't be,
/// the delivery fails with a sentence before any connection is tried. No smbd needed.
struct SMBLibraryTests {
  /// Port 1 on loopback: never contacted, as the failure comes first.
  private static let destination = "smb://127.0.0.1:1/guest/x"

  private func connectFailure(library: String) async throws -> ForwardFailure? {
    let destination = try SMBDestination(Self.destination)
    return await #expect(throws: ForwardFailure.self) {
      _ = try await SMBFileSystem.connect(to: destination, library: library)
    }
  }

  @Test func libraryMissing() async throws {
    let failure = try await connectFailure(library: "libsmbclient-missing.so.0")
    #expect(failure?.kind == .smbUnavailable)
    #expect(
      failure?.description
        == "Couldn't forward to 127.0.0.1 — SMB forwarding needs the libsmbclient library "
        + "(Debian package libsmbclient), which could not be loaded (libsmbclient-missing.so.0: "
        + "cannot open shared object file: No such file or directory). "
        + "Install libsmbclient, then forward again.")
  }

  /// A library that loads but is not libsmbclient: the first function looked up is missing.
  @Test func functionsMissing() async throws {
    let failure = try await connectFailure(library: "libc.so.6")
    #expect(failure?.kind == .smbUnavailable)
    #expect(failure?.description.contains("undefined symbol: smbc_new_context") == true)
  }

  /// `SMBOptions.timeout` is what libsmbclient waits for a connection or a reply, read back
  /// from the context (the library's default is 20 s). Creating a context contacts no server.
  @Test(arguments: [1, 7, 45])
  func aContextHoldsTheConfiguredTimeout(seconds: Int) async throws {
    let destination = try SMBDestination(
      Self.destination, options: SMBOptions(timeout: .seconds(seconds)))
    let held = try await DedicatedThread.smb.run { () throws -> Int32 in
      if let reason = SMBLibrary.load() { throw SMBLoadFailure(reason: reason) }
      let context = try SMBContext(for: destination)
      defer { context.free() }
      return context.libraryTimeoutMilliseconds
    }
    #expect(held == Int32(seconds * 1000))
  }

  private struct SMBLoadFailure: Error { let reason: String }

  /// A failure is not remembered: the real library loads afterwards (the SMB suites then use it).
  @Test func realLibraryLoadsAfterAFailure() {
    #expect(SMBLibrary.load("libsmbclient-missing.so.0") != nil)
    #expect(SMBLibrary.load() == nil)
  }
}
