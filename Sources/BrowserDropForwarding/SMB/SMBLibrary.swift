internal import CSMBClientLoader

/// libsmbclient, opened with `dlopen` the first time an SMB destination is used instead of being
/// linked: a process that never forwards to SMB never maps it, nor the ~100 samba, gnutls, krb5
/// and ICU libraries it brings in, and runs where the library is not installed at all.
enum SMBLibrary {
  /// The shared object of Debian's package libsmbclient.
  static let defaultName = "libsmbclient.so.0"

  /// Opens `name` and resolves every function ``SMBContext`` calls; returns `nil` once they are
  /// usable, otherwise the dynamic loader's reason, e.g. "libsmbclient.so.0: cannot open shared
  /// object file: No such file or directory".
  ///
  /// Call it on the thread that then uses ``SMBContext``, before each delivery: it is cheap once
  /// the library has loaded, and a failure is not remembered, so installing the library later
  /// fixes the next delivery without a restart.
  static func load(_ name: String = defaultName) -> String? {
    withUnsafeTemporaryAllocation(of: CChar.self, capacity: 512) { buffer in
      guard let start = buffer.baseAddress, cbd_smbc_load(name, start, buffer.count) != 0 else {
        return nil
      }
      return String(cString: start)
    }
  }
}
