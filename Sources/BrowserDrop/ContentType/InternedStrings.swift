internal import Synchronization

/// A bounded set of strings handed out as shared copies: `intern` returns the stored string equal
/// to its argument, so equal values share one buffer instead of one allocation each. Past
/// `capacity` distinct values, new ones are returned as they are.
final class InternedStrings: Sendable {
  private let capacity: Int
  private let strings = Mutex<Set<String>>([])

  init(capacity: Int) { self.capacity = capacity }

  func intern(_ string: String) -> String {
    strings.withLock { strings in
      if let index = strings.firstIndex(of: string) { return strings[index] }
      if strings.count < capacity { strings.insert(string) }
      return string
    }
  }
}
