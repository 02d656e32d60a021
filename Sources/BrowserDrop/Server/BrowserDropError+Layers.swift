/// The lower layers' errors as the public error, with the cases and sentences the server has
/// always thrown: Staging and Network name what failed in their own terms, only the server
/// speaks `BrowserDropError`.
extension BrowserDropError {
  init(_ error: StagingError) {
    switch error {
    case .unavailable(let path, let reason): self = .stagingUnavailable(path: path, reason: reason)
    }
  }

  init(_ error: ListenError) {
    switch error {
    case .portUnavailable(let port, let reason): self = .portUnavailable(port: port, reason: reason)
    case .invalidBindAddress(let text): self = .invalidBindAddress(text)
    }
  }
}
