import Foundation
import Testing

@testable import BrowserDropForwarding

struct NameAndAddressTests {
  @Test(arguments: [
    ("report.pdf", 2, false, "report 2.pdf"), ("report.pdf", 3, false, "report 3.pdf"),
    ("archive.tar.gz", 2, false, "archive.tar 2.gz"), (".hidden", 2, false, ".hidden 2"),
    ("README", 2, false, "README 2"), ("v1.2", 2, true, "v1.2 2"), ("x.", 2, false, "x. 2"),
    ("report.pdf", 1, false, "report.pdf"),
  ])
  func numberedNames(name: String, number: Int, isDirectory: Bool, expected: String) {
    #expect(NameRules.numbered(name, number, isDirectory: isDirectory) == expected)
  }

  @Test(arguments: [
    ("plain.txt", "plain.txt"), ("a:b*c?d.txt", "a_b_c_d.txt"), ("\"q\" <x> |y|", "_q_ _x_ _y_"),
    ("back\\slash", "back_slash"), ("trail.", "trail_"), ("spaces  ", "spaces__"),
    ("CON", "_CON"), ("con.txt", "_con.txt"), ("LPT9.log", "_LPT9.log"), ("COM10", "COM10"),
    ("CONSOLE.txt", "CONSOLE.txt"), ("Ünïcødé 日本.jpg", "Ünïcødé 日本.jpg"), ("tab\there", "tab_here"),
  ])
  func windowsSafeNames(name: String, expected: String) {
    #expect(NameRules.windowsSafe(name) == expected)
  }

  @Test func temporaryNamesAreHiddenAndUniquePerAttempt() {
    let attempts = (0..<1000).map { _ in NameRules.attemptID() }
    #expect(Set(attempts).count == attempts.count)
    #expect(attempts.allSatisfy { $0.count == 16 && UInt64($0, radix: 16) != nil })
    let name = NameRules.temporaryName(attempt: attempts[0])
    #expect(name == ".browserdrop-\(attempts[0]).part")
    #expect(NameRules.windowsSafe(name) == name)
    // The name versions before attempts used, which a resume of their manifests recognises.
    #expect(NameRules.legacyTemporaryName(for: "a.bin") == ".browserdrop-07474cb513e07aa3.part")
  }

  @Test func parsesAddresses() throws {
    let full = try SMBDestination("smb://alice@nas.local:4445/intake/scans/2024%20Q1")
    #expect(full.host == "nas.local")
    #expect(full.port == 4445)
    #expect(full.share == "intake")
    #expect(full.path == ["scans", "2024 Q1"])
    #expect(full.credentials.username == "alice")
    #expect(full.description == "smb://alice@nas.local:4445/intake/scans/2024%20Q1")

    let guest = try SMBDestination("smb://192.168.1.50/public")
    #expect(guest.port == 445)
    #expect(guest.path.isEmpty)
    #expect(guest.credentials.isGuest)
    #expect(guest.description == "smb://192.168.1.50/public")
  }

  @Test(arguments: [
    "http://nas/share", "smb://nas", "smb://nas/", "smb:///share", "smb://u:pw@nas/share",
    "smb://nas/share/../etc",
  ])
  func rejectsBadAddresses(address: String) {
    let failure = #expect(throws: ForwardFailure.self) { try SMBDestination(address) }
    #expect(failure?.kind == .invalidDestination)
  }

  @Test func credentialsNeverShowThePassword() {
    let credentials = Credentials(username: "dropper", password: "hunter2")
    for text in [
      "\(credentials)", String(reflecting: credentials),
      String(describing: Mirror(reflecting: credentials).children.map(\.value)),
    ] {
      #expect(!text.contains("hunter2"))
    }
  }

  @Test func encodesEveryReservedCharacter() {
    #expect(SMBURL.encode("100% done?#1/x y") == "100%25%20done%3F%231%2Fx%20y")
    #expect(SMBURL.encode("ü") == "%C3%BC")
  }

  @Test func decodesAsRemovingPercentEncoding() {
    for text in [
      "abc", "%41", "%zz", "%4", "%", "a%2Fb", "%c3%a9", "%E9", "%00", "%C3", "%e2%82%ac", "100%",
      "%%41", "é%20x", "+",
    ] {
      #expect(SMBURL.decode(text) == text.removingPercentEncoding, "\(text)")
    }
  }
}
