import BrowserDropSystem
import Glibc
import Testing

@Suite struct DurableTests {
  private func scratch() -> String {
    var template = Array("/tmp/browserdrop-durable.XXXXXX".utf8CString)
    let path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    return path
  }

  private func contents(_ path: String) throws -> [UInt8] {
    let file = try FileDescriptor.open(path, O_RDONLY)
    var bytes = [UInt8](repeating: 0, count: 4096)
    let count = try bytes.withUnsafeMutableBytes { (buffer) throws(SystemError) in
      try file.read(into: buffer, at: 0)
    }
    return Array(bytes[..<count])
  }

  private func names(in folder: String) -> [String] {
    guard let directory = opendir(folder) else { return [] }
    defer { closedir(directory) }
    var found: [String] = []
    while let entry = readdir(directory) {
      let name = withUnsafeBytes(of: entry.pointee.d_name) {
        String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
      }
      if name != "." && name != ".." { found.append(name) }
    }
    return found.sorted()
  }

  @Test func replaceLeavesTheNewContentAndNoTemporaryFile() throws {
    let folder = scratch()
    defer { system("rm -rf '\(folder)'") }
    let path = folder + "/state.json"
    try Durable.replace(path, with: Array("first".utf8))
    try Durable.replace(path, with: Array("second, longer".utf8))
    #expect(try contents(path) == Array("second, longer".utf8))
    #expect(names(in: folder) == ["state.json"])
  }

  @Test func replaceIntoAMissingFolderThrowsAndChangesNothing() {
    #expect(throws: SystemError(call: "openat", code: ENOENT)) {
      try Durable.replace("/nonexistent/browserdrop/state.json", with: [1, 2, 3])
    }
  }

  @Test func appendAddsRecordsInOrder() throws {
    let folder = scratch()
    defer { system("rm -rf '\(folder)'") }
    let path = folder + "/log"
    try Durable.append(Array("one\n".utf8), to: path)
    try Durable.append(Array("two\n".utf8)[...], to: path)
    #expect(try contents(path) == Array("one\ntwo\n".utf8))
    try Durable.syncFolder(folder)
  }

  @Test func syncFolderNamesTheCallThatFailed() {
    #expect(throws: SystemError(call: "openat", code: ENOENT)) {
      try Durable.syncFolder("/nonexistent/browserdrop")
    }
  }

  @Test func aDescriptorIsClosedOnceWhenItsOwnerGoesAway() throws {
    let raw: Int32
    do {
      let file = try FileDescriptor.open("/dev/null", O_RDONLY)
      raw = file.rawValue
      #expect(fcntl(raw, F_GETFD) >= 0)
    }
    #expect(fcntl(raw, F_GETFD) == -1 && errno == EBADF)

    let handedOver = try FileDescriptor.open("/dev/null", O_RDONLY).take()
    #expect(fcntl(handedOver, F_GETFD) >= 0)
    close(handedOver)
  }
}
