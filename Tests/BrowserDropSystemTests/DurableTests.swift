import BrowserDropSystem
import Glibc
import Testing

@Suite struct DurableTests {
  private func scratch() -> String {
    var template = Array("/tmp/browserdrop-durable.XXXXXX".utf8CString)
    let path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    return path
  }

  private func contents(_ path: String, limit: Int = 4096) throws -> [UInt8] {
    let file = try FileDescriptor.open(path, O_RDONLY)
    var bytes = [UInt8](repeating: 0, count: limit)
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

  @Test func replaceKeepsThePermissionsOfTheFileItReplaces() throws {
    let folder = scratch()
    defer { system("rm -rf '\(folder)'") }
    let path = folder + "/shared.txt"
    try Durable.replace(path, with: Array("v1".utf8), mode: 0o644)
    chmod(path, 0o640)
    try Durable.replace(path, with: Array("v2".utf8))
    var info = stat()
    stat(path, &info)
    #expect(info.st_mode & 0o7777 == 0o640)
    #expect(try contents(path) == Array("v2".utf8))
  }

  @Test func writersReplacingOneFileAtOnceLeaveOneWholeVersionAndNoTemporaryFile() async throws {
    let folder = scratch()
    defer { system("rm -rf '\(folder)'") }
    let path = folder + "/state"
    let pool = BlockingPool(name: "bd-writers", threads: 4)
    let versions = (0..<8).map { [UInt8](repeating: UInt8(65 + $0), count: 64 * 1024) }
    try await withThrowingTaskGroup(of: Void.self) { group in
      for round in 0..<64 {
        let version = versions[round % versions.count]
        group.addTask {
          try await pool.run { () throws(SystemError) in try Durable.replace(path, with: version) }
        }
      }
      try await group.waitForAll()
    }
    await pool.shutdown()
    #expect(versions.contains(try contents(path, limit: 128 * 1024)))
    #expect(names(in: folder) == ["state"])
  }

  @Test func aDescriptorIsClosedOnceWhenItsOwnerGoesAway() throws {
    // A pipe shows the close without racing other tests for descriptor numbers: the read end
    // sees the end of the stream once the only write end is closed.
    var ends: [Int32] = [0, 0]
    try Syscall.blocking("pipe") { pipe(&ends) }
    defer { close(ends[0]) }
    do {
      let writer = FileDescriptor(owning: ends[1])
      #expect(write(writer.rawValue, "x", 1) == 1)
    }
    var buffer = [UInt8](repeating: 0, count: 4)
    #expect(read(ends[0], &buffer, 4) == 1)
    #expect(read(ends[0], &buffer, 4) == 0)

    let handedOver = try FileDescriptor.open("/dev/null", O_RDONLY).take()
    #expect(fcntl(handedOver, F_GETFD) >= 0)
    close(handedOver)
  }
}
