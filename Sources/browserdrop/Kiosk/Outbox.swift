import BrowserDrop
import FoundationEssentials
import Glibc

/// A closed batch waiting in the outbox.
struct Batch: Sendable, Equatable {
  /// Its number, from 1, never reused for a staging root.
  let number: Int
  /// Its folder's name at the destination (`--batch-folder`), fixed when it closed so a retry
  /// after a crash delivers into the same folder and nothing is sent twice.
  let folderName: String
  /// Where its files wait.
  let folder: URL
}

/// The kiosk's crash-safe outbox under the staging root:
///
///     outbox/journal/<n>.json   what batch n is: {"number","folderName","source"}
///     outbox/<n>/               batch n's files (its session folder, moved here)
///     outbox/next               the next batch number
///
/// A batch's journal entry is written and flushed to the disk before its folder moves in, and
/// removed only after every file arrived at the destination (which removes the folder). So at
/// any crash point the outbox says which folders are batches and where they go.
/// Call only from `BlockingIO` (everything here blocks on the disk).
struct Outbox: Sendable {
  /// The staging root.
  let root: URL
  /// `root/outbox`.
  let directory: URL
  private let journal: URL

  init(stagingRoot: URL) {
    root = stagingRoot
    directory = stagingRoot.appending(path: "outbox", directoryHint: .isDirectory)
    journal = directory.appending(path: "journal", directoryHint: .isDirectory)
  }

  private struct Entry: Codable {
    var number: Int
    var folderName: String
    var source: String
  }

  /// Finishes what a crash interrupted and returns the batches waiting, oldest first:
  /// half-moved batches are moved in, delivered ones are forgotten, and session folders left
  /// with complete files (uploads answered 201, never closed into a batch) become batches.
  /// Run before `removeLeftovers`, which would delete those session folders.
  func recover(folderName: (Int) -> String) throws -> (batches: [Batch], rescued: Int) {
    try FileManager.default.createDirectory(at: journal, withIntermediateDirectories: true)
    var batches: [Batch] = []
    var claimed = Set<String>()
    for entry in try entries() {
      let folder = batchFolder(entry.number)
      let source = root.appending(path: entry.source, directoryHint: .isDirectory)
      if FileManager.default.fileExists(atPath: folder.path) {
        batches.append(Batch(number: entry.number, folderName: entry.folderName, folder: folder))
      } else if FileManager.default.fileExists(atPath: source.path) {
        try move(source, to: folder)
        batches.append(Batch(number: entry.number, folderName: entry.folderName, folder: folder))
      } else {
        try removeEntry(entry.number)
      }
      claimed.insert(entry.source)
    }
    var rescued = 0
    for name in try StagingLayout.sessionFolderNames(in: root) where !claimed.contains(name) {
      let folder = root.appending(path: name, directoryHint: .isDirectory)
      guard Self.holdsAFile(folder) else { continue }
      batches.append(try add(folder, folderName: folderName))
      rescued += 1
    }
    return (batches, rescued)
  }

  /// Makes a closed session folder a batch: the journal entry first (flushed), then the move.
  func add(_ sessionFolder: URL, folderName: (Int) -> String) throws -> Batch {
    let number = try takeNumber()
    let entry = Entry(
      number: number, folderName: folderName(number), source: sessionFolder.lastPathComponent)
    let data = try JSONEncoder().encode(entry)
    try Durable.write(data, to: journal.appending(path: "\(number).json"))
    let folder = batchFolder(number)
    try move(sessionFolder, to: folder)
    return Batch(number: number, folderName: entry.folderName, folder: folder)
  }

  /// Forgets a batch whose files all arrived (the forwarder has removed its folder).
  func complete(_ batch: Batch) throws {
    if FileManager.default.fileExists(atPath: batch.folder.path) {
      try FileManager.default.removeItem(at: batch.folder)
    }
    try removeEntry(batch.number)
  }

  private func batchFolder(_ number: Int) -> URL {
    directory.appending(path: "\(number)", directoryHint: .isDirectory)
  }

  private func entries() throws -> [Entry] {
    let names = try FileManager.default.contentsOfDirectory(atPath: journal.path)
    var entries: [Entry] = []
    for name in names where name.hasSuffix(".json") {
      // A torn entry can only be one whose rename never happened; Durable.write renames last.
      guard let data = FileManager.default.contents(atPath: journal.appending(path: name).path),
        let entry = try? JSONDecoder().decode(Entry.self, from: data)
      else { continue }
      entries.append(entry)
    }
    return entries.sorted { $0.number < $1.number }
  }

  private func takeNumber() throws -> Int {
    let counter = directory.appending(path: "next")
    let stored =
      FileManager.default.contents(atPath: counter.path)
      .flatMap { String(data: $0, encoding: .utf8) }
      .flatMap { Int($0.trimmingWhitespaceAndNewlines()) } ?? 1
    let highest = try entries().map(\.number).max() ?? 0
    let number = max(stored, highest + 1)
    try Durable.write(Data("\(number + 1)\n".utf8), to: counter)
    return number
  }

  private func move(_ source: URL, to target: URL) throws {
    guard rename(source.path, target.path) == 0 else {
      throw CocoaError(
        .fileWriteUnknown,
        userInfo: [
          filePathKey: target.path,
          underlyingErrorKey: POSIXError(.init(rawValue: errno) ?? .EIO),
        ])
    }
    Durable.syncDirectory(directory)
    Durable.syncDirectory(source.deletingLastPathComponent())
  }

  private func removeEntry(_ number: Int) throws {
    let path = journal.appending(path: "\(number).json").path
    if unlink(path) != 0, errno != ENOENT {
      throw CocoaError(.fileWriteUnknown, userInfo: [filePathKey: path])
    }
    Durable.syncDirectory(journal)
  }

  /// Whether a regular file not named `.*` is anywhere under `folder` (hidden folders too;
  /// links are not followed, unreadable folders skipped).
  private static func holdsAFile(_ folder: URL) -> Bool {
    holdsAFile(path: folder.path)
  }

  private static func holdsAFile(path: String) -> Bool {
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else {
      return false
    }
    for name in names {
      let child = path + "/" + name
      var info = stat()
      guard lstat(child, &info) == 0 else { continue }
      switch info.st_mode & S_IFMT {
      case S_IFREG where !name.hasPrefix("."): return true
      case S_IFDIR where holdsAFile(path: child): return true
      default: continue
      }
    }
    return false
  }
}

/// The `CocoaError` user-info keys Foundation names `NSFilePathErrorKey` and
/// `NSUnderlyingErrorKey` (FoundationEssentials has no names for them).
let filePathKey = "NSFilePath"
let underlyingErrorKey = "NSUnderlyingError"

/// Writes that survive a power cut: data flushed, then renamed into place, then the folder
/// flushed.
enum Durable {
  static func write(_ data: Data, to url: URL) throws {
    let temporary = url.deletingLastPathComponent().appending(
      path: "." + url.lastPathComponent + ".tmp")
    let descriptor = open(temporary.path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0o600)
    guard descriptor >= 0 else {
      throw CocoaError(.fileWriteNoPermission, userInfo: [filePathKey: temporary.path])
    }
    let complete = data.withUnsafeBytes { buffer -> Bool in
      var offset = 0
      while offset < buffer.count {
        let written = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
        if written < 0 {
          if errno == EINTR { continue }
          return false
        }
        offset += written
      }
      return true
    }
    let synced = fsync(descriptor) == 0
    close(descriptor)
    guard complete, synced, rename(temporary.path, url.path) == 0 else {
      unlink(temporary.path)
      throw CocoaError(.fileWriteUnknown, userInfo: [filePathKey: url.path])
    }
    syncDirectory(url.deletingLastPathComponent())
  }

  static func syncDirectory(_ url: URL) {
    let descriptor = open(url.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard descriptor >= 0 else { return }
    fsync(descriptor)
    close(descriptor)
  }
}
