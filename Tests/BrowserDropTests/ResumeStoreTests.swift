import BrowserDropSystem
import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

@testable import BrowserDrop

/// What the staging root's resumable store makes, at start, of what a crash can leave at each
/// step of storing an upload (`ResumableStore`'s order of steps: a record without its partial
/// file is a stored upload), and a stored upload that a later session still reports as
/// complete until it expires.
@Suite("The resumable store after a crash")
struct ResumeStoreTests {
  static func store(_ root: URL) throws -> ResumableStore {
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    let store = ResumableStore(staging: StagingFolder(root: root), scope: .stagingRoot)
    try store.prepare()
    return store
  }

  static func record(
    length: Int, boot: String = ResumableStore.bootID, age: Double = 0
  )
    -> ResumableStore.Record
  {
    ResumableStore.Record(
      path: "a.bin", length: length, offset: 0, boot: boot,
      updated: Date().timeIntervalSince1970 - age)
  }

  /// An upload of `length` bytes with `written` of them in its partial file.
  static func make(
    _ store: ResumableStore, _ id: UploadID, length: Int, written: Int,
    record: ResumableStore.Record? = nil
  ) throws {
    let fd = try store.create(id, record ?? Self.record(length: length))
    let bytes = [UInt8](repeating: 7, count: written)
    let count = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    close(fd)
    #expect(count == written)
  }

  /// Writes `record` as the upload's record file, as a process that stored it would have,
  /// at the time it says (the file's modification time too: the store reads both).
  static func writeRecord(
    _ store: ResumableStore, _ id: UploadID, _ record: ResumableStore.Record
  ) throws {
    let path = store.folder + "/\(id).record"
    try JSONEncoder().encode(record).write(to: URL(filePath: path))
    let seconds = Int(record.updated.rounded(.down))
    let time = timespec(tv_sec: seconds, tv_nsec: 0)
    let times = [time, time]
    #expect(utimensat(AT_FDCWD, path, times, 0) == 0)
  }

  static func id(_ n: Int) throws -> UploadID {
    try UploadID(validating: Substring(String(repeating: "0", count: 31) + String(n, radix: 16)))
  }

  static func size(_ path: String) -> Int? {
    var info = stat()
    return stat(path, &info) == 0 ? Int(info.st_size) : nil
  }

  @Test func eachCrashPointIsReadBackAsStoredOrPaused() throws {
    let folder = try TemporaryFolder()
    let store = try Self.store(folder.url)
    let (full, kept, renamed, cut, rebooted, empty, expired) = (
      try Self.id(1), try Self.id(2), try Self.id(3), try Self.id(4), try Self.id(5),
      try Self.id(6), try Self.id(7)
    )
    // Every byte written, not yet renamed (a crash before step 2).
    try Self.make(store, full, length: 100, written: 100)
    // The same, paused in a session (the hold released after the last byte arrived).
    try Self.make(store, kept, length: 100, written: 0)
    let fd = open(store.partialPath(kept), O_RDWR)
    #expect(Glibc.write(fd, [UInt8](repeating: 1, count: 100), 100) == 100)
    #expect(try store.keep(fd: fd, kept, Self.record(length: 100)) == 99)
    close(fd)
    // Renamed into the session folder (a crash after step 2): the record alone.
    try Self.make(store, renamed, length: 100, written: 100)
    #expect(rename(store.partialPath(renamed), folder.path("a.bin").path) == 0)
    // Cut off mid-body, same boot: the file's size counts.
    try Self.make(store, cut, length: 100, written: 40)
    // Cut off before a reboot: only the recorded offset counts, and the file is cut back.
    var old = Self.record(length: 100, boot: "another boot")
    old.offset = 30
    try Self.make(store, rebooted, length: 100, written: 80, record: old)
    // An empty upload never stored, and a stored one past its lifetime.
    try Self.make(store, empty, length: 0, written: 0)
    try Self.writeRecord(store, expired, Self.record(length: 100, age: 7200))
    // Debris: a replacement's temporary file and a partial file without a record.
    _ = FileManager.default.createFile(atPath: store.folder + "/.x.record.tmp-1-2", contents: nil)
    _ = FileManager.default.createFile(
      atPath: store.folder + "/\(try Self.id(9)).partial", contents: Data([1]))

    let found = Dictionary(
      store.recover(expiresAfter: .seconds(3600)).map { ($0.0, $0.1) },
      uniquingKeysWith: { first, _ in first })
    #expect(found[full]?.stored == false && found[full]?.offset == 99, "never reported complete")
    #expect(found[kept]?.stored == false && found[kept]?.offset == 99)
    #expect(found[renamed]?.stored == true && found[renamed]?.offset == 100)
    #expect(found[cut]?.offset == 40)
    #expect(found[rebooted]?.offset == 30 && Self.size(store.partialPath(rebooted)) == 30)
    #expect(found[empty] == nil && found[expired] == nil)
    #expect(found.count == 5)
    let names = Set(try FileManager.default.contentsOfDirectory(atPath: store.folder))
    let paused = [cut, full, kept, rebooted].flatMap { ["\($0).partial", "\($0).record"] }
    #expect(names == Set(paused + ["\(renamed).record"]), "debris or forgotten uploads stayed")
  }

  /// A crash on the same boot leaves a record older than its partial file (the last checkpoint,
  /// here none): the start flushes the file and records its offset durably, so a power cut
  /// before the next checkpoint sends the client back to that offset, not to the older one.
  @Test func theOffsetRecoveredAfterACrashIsRecordedForAPowerCut() throws {
    let folder = try TemporaryFolder()
    let store = try Self.store(folder.url)
    let cut = try Self.id(1)
    try Self.make(store, cut, length: 100, written: 40)
    #expect(store.recover(expiresAfter: .seconds(3600)).first { $0.0 == cut }?.1.offset == 40)
    // The power cut: a later start on another boot believes the record alone.
    let data = try Data(contentsOf: URL(filePath: store.folder + "/\(cut).record"))
    var record = try JSONDecoder().decode(ResumableStore.Record.self, from: data)
    #expect(record.offset == 40, "the recovered offset is in the record")
    record.boot = "another boot"
    try Self.writeRecord(store, cut, record)
    #expect(store.recover(expiresAfter: .seconds(3600)).first { $0.0 == cut }?.1.offset == 40)
    #expect(Self.size(store.partialPath(cut)) == 40)
  }

  /// `updated` is the time of the last byte: a keep (or checkpoint) whose offset did not grow
  /// past the record on the disk keeps that record's time, so requests that bring nothing never
  /// keep an upload alive across restarts or batches.
  @Test func aKeepThatBroughtNothingKeepsTheTimeOfTheLastByte() throws {
    let folder = try TemporaryFolder()
    let store = try Self.store(folder.url)
    let id = try Self.id(1)
    try Self.make(store, id, length: 100, written: 40)
    let fd = open(store.partialPath(id), O_RDWR)
    defer { close(fd) }
    let onDisk = { () throws -> ResumableStore.Record in
      let data = try Data(contentsOf: URL(filePath: store.folder + "/\(id).record"))
      return try JSONDecoder().decode(ResumableStore.Record.self, from: data)
    }
    // 0 → 40: a byte arrived, the time is now.
    #expect(try store.keep(fd: fd, id, Self.record(length: 100)) == 40)
    #expect(try onDisk().updated > Date().timeIntervalSince1970 - 60)
    // The record says an hour ago, at 40; a request from 40 brings nothing.
    var old = Self.record(length: 100, age: 3600)
    old.offset = 40
    try Self.writeRecord(store, id, old)
    #expect(try store.keep(fd: fd, id, Self.record(length: 100)) == 40)
    #expect(try onDisk().updated == old.updated, "renewed by a request that brought nothing")
    // One more byte: renewed.
    #expect(Glibc.pwrite(fd, [1], 1, 40) == 1)
    #expect(try store.keep(fd: fd, id, Self.record(length: 100)) == 41)
    #expect(try onDisk().updated > Date().timeIntervalSince1970 - 60)
  }

  /// A paused upload taken up from the store (a kiosk's next batch, a restart) is firm only for
  /// what is left of `firmReservation` since its last byte: a half-hour-old one gives way at once.
  @Test func aRecoveredUploadIsFirmOnlyForWhatIsLeftSinceItsLastByte() async throws {
    let folder = try TemporaryFolder()
    let store = try Self.store(folder.url)
    let (old, recent) = (try Self.id(1), try Self.id(2))
    for (id, age) in [(old, 1800.0), (recent, 60.0)] {
      var record = Self.record(length: 1000, age: age)
      record.offset = 100
      try Self.make(store, id, length: 1000, written: 100, record: record)
    }
    let session = try await ResumeTests.start(root: folder.url, scope: .stagingRoot)
    defer { Task { await session.stop() } }
    let table = await session.server.resumeTable
    let now = await session.server.clock.now
    #expect(table.softReservations(now: now).map(\.id) == [old])
    #expect(table.firmRemaining(now: now) == 900)
    // Firm for the rest of its 10 minutes since its last byte, 9 minutes less however long
    // the start took (16 s in a loaded parallel run): firm at 4, soft past 9.
    #expect(table.firmRemaining(now: now + .seconds(240)) == 900)
    #expect(table.softReservations(now: now + .seconds(541)).map(\.id) == [old, recent])
  }

  /// A cancel removes the records before anything else: what a crash part-way leaves (partial
  /// files without their records) recovers to nothing, never to an upload read as stored.
  @Test func removingTheStoreTakesTheRecordsFirst() throws {
    let folder = try TemporaryFolder()
    let store = try Self.store(folder.url)
    try Self.make(store, try Self.id(1), length: 10, written: 4)
    try Self.writeRecord(store, try Self.id(2), Self.record(length: 10))
    // The state between the two steps of removeAll: every record gone, the partial left.
    for name in try FileManager.default.contentsOfDirectory(atPath: store.folder)
    where name.hasSuffix(".record") {
      unlink(store.folder + "/" + name)
    }
    #expect(store.recover(expiresAfter: .seconds(3600)).isEmpty)
    try Self.make(store, try Self.id(3), length: 10, written: 4)
    store.removeAll()
    #expect(!FileManager.default.fileExists(atPath: store.folder))
  }

  @Test func onlyTheNewestStoredRecordsAreKept() throws {
    let folder = try TemporaryFolder()
    let store = try Self.store(folder.url)
    for n in 1...3 {
      try Self.writeRecord(store, try Self.id(n), Self.record(length: 10, age: Double(10 - n)))
    }
    let kept = store.recover(expiresAfter: .seconds(3600), storedLimit: 2).map(\.0)
    #expect(Set(kept) == [try Self.id(2), try Self.id(3)])
    #expect(
      !FileManager.default.fileExists(atPath: store.folder + "/\(try Self.id(1)).record"))
  }

  /// A stored upload is complete for a later session on the same staging root (as for the
  /// kiosk's next batch or the process started again): HEAD says so, and a POST or PATCH of the
  /// id stores nothing again; once `expiresAfter` has passed on the session clock the id is
  /// unknown and its record gone.
  @Test func aStoredUploadStaysCompleteForALaterSessionUntilItExpires() async throws {
    let first = try await ResumeTests.start(scope: .stagingRoot)
    defer { try? FileManager.default.removeItem(at: first.root) }
    let body = TestBytes.make(120_000, seed: 11)
    let id = ResumeClient.randomID()
    let before = ResumeClient(port: first.port, path: "Album/song.bin", id: id)
    let stored = try await before.exchange(before.postHead(length: body.count), body[...])
    #expect(stored.status == 201)
    _ = try await first.server.finish()

    let clock = ManualClock()
    let second = try await ResumeTests.start(root: first.root, scope: .stagingRoot, clock: clock)
    defer { Task { await second.stop() } }
    let client = ResumeClient(port: second.port, path: "Album/song.bin", id: id)
    let head = try await client.head()
    #expect(head.status == 204 && head.headers["upload-offset"] == "120000")
    #expect(head.headers["upload-length"] == "120000")
    let post = try await client.exchange(client.postHead(length: body.count), body[...])
    #expect(post.status == 409 && post.errorCode == "offset_mismatch")
    #expect(post.headers["upload-offset"] == "120000")
    let patch = try await client.exchange(client.patchHead(offset: 0, length: 120_000), body[...])
    #expect(patch.status == 409 && patch.errorCode == "offset_mismatch")
    let elsewhere = try await client.head(path: "Album/other.bin")
    #expect(elsewhere.status == 409 && elsewhere.errorCode == "upload_mismatch")
    #expect(second.stagedFiles().isEmpty, "stored a second time")
    let events = await second.log.events
    #expect(!events.contains { if case .uploadStarted = $0 { true } else { false } })

    let record = first.root.path + "/.browserdrop-resumable/\(id).record"
    #expect(FileManager.default.fileExists(atPath: record))
    // Wall time passed since the upload was stored counts too: 100 s of margin for it (a
    // loaded machine once took more than 10 s between the upload and this look).
    clock.advance(by: .seconds(3500))
    #expect(try await client.head().status == 204, "expired early")
    clock.advance(by: .seconds(100))
    #expect(try await client.head().status == 404)
    #expect(!FileManager.default.fileExists(atPath: record), "the expired record stayed")
  }

  /// A POST that replaces a paused upload of the same id and fails to write its record (here
  /// the record is a symbolic link, which the store never follows when writing) leaves neither
  /// file: the old record alone would read as a stored upload.
  @Test func aFailedCreateNeverLeavesTheOldRecordAlone() throws {
    let folder = try TemporaryFolder()
    let store = try Self.store(folder.url)
    let id = try Self.id(1)
    try Self.make(store, id, length: 100, written: 40)
    let record = store.folder + "/\(id).record"
    #expect(rename(record, folder.path("elsewhere.record").path) == 0)
    #expect(symlink(folder.path("elsewhere.record").path, record) == 0)
    #expect(throws: SystemError.self) { try store.create(id, Self.record(length: 100)) }
    let found = store.recover(expiresAfter: .seconds(3600))
    #expect(!found.contains { $0.0 == id && $0.1.stored }, "read back as stored")
    #expect(!FileManager.default.fileExists(atPath: store.partialPath(id)))
  }

  /// A partial file that is there but can't be opened at start (here a symbolic link, which
  /// the store refuses to follow; out of descriptors or a permission would do the same) is not
  /// taken as gone: the upload is skipped and its files stay for a later start.
  @Test func aPartialFileThatCannotBeOpenedIsKept() throws {
    let folder = try TemporaryFolder()
    let store = try Self.store(folder.url)
    let id = try Self.id(1)
    try Self.make(store, id, length: 100, written: 40)
    let partial = store.partialPath(id)
    #expect(rename(partial, folder.path("bytes").path) == 0)
    #expect(symlink(folder.path("bytes").path, partial) == 0)
    #expect(store.recover(expiresAfter: .seconds(3600)).isEmpty)
    #expect(FileManager.default.fileExists(atPath: store.folder + "/\(id).record"))
    #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: partial)) != nil)
  }

  /// A stored upload is remembered for `expiresAfter` after it was stored, also by a later
  /// session: here its upload began almost `expiresAfter` earlier (the record says so), and a
  /// kiosk's next batch still answers HEAD with "complete" after a while.
  @Test func aStoredUploadIsRememberedFromWhenItWasStored() async throws {
    let first = try await ResumeTests.start(scope: .stagingRoot)
    defer { try? FileManager.default.removeItem(at: first.root) }
    let pauses = PauseLog(first.server.pauses)
    let body = TestBytes.make(100_000, seed: 5)
    let id = ResumeClient.randomID()
    let client = ResumeClient(port: first.port, path: "old.bin", id: id)
    try await ResumeTests.cutPost(client, body, after: 40_000, pauses: pauses)
    _ = try await first.server.finish()
    // The upload began 3500 s ago (of 3600).
    let path = first.root.path + "/.browserdrop-resumable/\(id).record"
    var record = try JSONDecoder().decode(
      ResumableStore.Record.self, from: Data(contentsOf: URL(filePath: path)))
    record.updated -= 3500
    try JSONEncoder().encode(record).write(to: URL(filePath: path))

    let second = try await ResumeTests.start(
      root: first.root, scope: .stagingRoot, clock: ManualClock())
    let resumed = ResumeClient(port: second.port, path: "old.bin", id: id)
    #expect(try await resumed.offset() == 40_000)
    let reply = try await resumed.exchange(
      resumed.patchHead(offset: 40_000, length: 60_000), body[40_000...])
    #expect(reply.status == 201)
    _ = try await second.server.finish()

    let clock = ManualClock()
    let third = try await ResumeTests.start(root: first.root, scope: .stagingRoot, clock: clock)
    defer { Task { await third.stop() } }
    let later = ResumeClient(port: third.port, path: "old.bin", id: id)
    clock.advance(by: .seconds(600))
    let head = try await later.head()
    #expect(head.status == 204, "forgotten: the page would send it again")
    #expect(head.headers["upload-offset"] == "100000")
  }
}
