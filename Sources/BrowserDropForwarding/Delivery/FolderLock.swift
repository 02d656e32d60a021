import BrowserDropSystem
import FoundationEssentials
import Glibc
import Synchronization

/// The one delivery of a folder: held for the whole of
/// ``Forwarder/forward(folder:to:policy:verify:progress:)``, so two deliveries of one folder
/// never run at once (each would read a manifest the other is still writing, send the same
/// file twice, or remove the other's temporary file or claim).
///
/// Two parts: a registry of the folders this process is delivering (two `Forwarder`s in one
/// process), and an `flock(LOCK_EX | LOCK_NB)` on a lock file of its own in the folder (other
/// processes). A second delivery in this process fails at once
/// (``ForwardFailure/Kind/folderBusy``); a lock held elsewhere is tried again for up to
/// ``busyWait`` first, since a process the host starts holds a copy of every descriptor until
/// its `exec` (`posix_spawn`, `fork`), the lock file's too, and with it the lock: a delivery
/// that just ended can look busy for that moment. The kernel releases the `flock` when its
/// process ends, also by `kill -9`, so a dead delivery never blocks the next one. Where the
/// folder's file system has no `flock`, only the registry holds.
struct FolderLock: ~Copyable {
  /// The lock file's name in the folder; it is never forwarded and goes with the folder.
  static let fileName = ".browserdrop-lock"

  /// The folders this process is delivering.
  private static let busy = Mutex(Set<String>())

  /// How long a lock held by another open file description is tried again before the
  /// delivery fails with `folderBusy`: a child process between its `fork` and its `exec` (seen
  /// for over a second on a loaded machine) is not a delivery.
  static let busyWait = Duration.seconds(5)

  /// The pause between two tries.
  static let busyRetryInterval = Duration.milliseconds(25)

  private let folder: String
  private let descriptor: Int32

  /// Takes the lock of `folder` (a standardized path), or throws `folderBusy`.
  static func acquire(_ folder: String) async throws -> FolderLock {
    let taken = busy.withLock { $0.insert(folder).inserted }
    guard taken else { throw Self.busyFailure(folder) }
    let deadline = ContinuousClock.now + busyWait
    var creating = true
    while true {
      switch await tryLocking(folder, creating: creating) {
      case .locked(let descriptor):
        return FolderLock(folder: folder, descriptor: descriptor)
      case .held where ContinuousClock.now < deadline:
        // Tried again without creating the lock file: a delivery that held it and is now
        // removing the delivered folder has unlinked it, and a new one would stop its removal.
        creating = false
        do {
          try await Task.sleep(for: busyRetryInterval)
        } catch {
          release(folder)
          throw error
        }
      case .held, .gone:
        release(folder)
        throw Self.busyFailure(folder)
      }
    }
  }

  /// What a try at the lock found.
  private enum Try {
    /// Taken: the lock file's descriptor (-1 without a lock file).
    case locked(Int32)
    /// Another open file description holds it.
    case held
    /// The lock file went (a retry, which does not create it): its holder is removing the
    /// delivered folder.
    case gone
  }

  /// Opens the lock file (creating it when `creating`) and takes its `flock`.
  private static func tryLocking(_ folder: String, creating: Bool) async -> Try {
    await DedicatedThread.localIO.run { () -> Try in
      let file = Glibc.open(
        folder + "/" + fileName, O_RDWR | O_CLOEXEC | (creating ? O_CREAT : 0), 0o600)
      if file < 0, !creating, errno == ENOENT { return .gone }
      // No lock file (a missing or read-only folder): the scan says what is wrong.
      guard file >= 0 else { return .locked(-1) }
      do throws(SystemError) {
        if try Syscall.nonBlocking("flock", { flock(file, LOCK_EX | LOCK_NB) }) == nil {
          Glibc.close(file)
          return .held
        }
      } catch {
        // A file system without flock (ENOLCK, EOPNOTSUPP): only this process is kept out.
      }
      return .locked(file)
    }
  }

  private init(folder: String, descriptor: Int32) {
    self.folder = folder
    self.descriptor = descriptor
  }

  private static func release(_ folder: String) {
    _ = busy.withLock { $0.remove(folder) }
  }

  private static func busyFailure(_ folder: String) -> ForwardFailure {
    ForwardFailure(kind: .folderBusy, place: .source, item: folder)
  }

  /// Gives the lock up: the lock file is closed (releasing the `flock`) on the local lane,
  /// then the folder leaves the registry.
  consuming func release() async {
    let (folder, descriptor) = (self.folder, self.descriptor)
    if descriptor >= 0 {
      _ = await DedicatedThread.localIO.run { Glibc.close(descriptor) }
    }
    Self.release(folder)
  }
}
