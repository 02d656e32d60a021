import Glibc

/// glibc's `pipe2`, which the Glibc module does not export (it is behind `_GNU_SOURCE`): both
/// ends close-on-exec from the moment they exist, so no child that another test spawns meanwhile
/// inherits them.
let pipe2: @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32 = {
  guard let symbol = dlsym(nil, "pipe2") else { fatalError("no pipe2 in libc") }
  return unsafeBitCast(
    symbol, to: (@convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32).self)
}()
