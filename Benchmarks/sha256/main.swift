// Hashes a 1 GiB buffer of pseudo-random bytes with BrowserDropForwarding's SHA-256 type, three
// times, and prints each run's MB/s and the median. Built by Benchmarks/sha256.sh.
import Glibc

let size = 1 << 30
let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 4096)
var state: UInt64 = 0x9E37_79B9_7F4A_7C15
for index in stride(from: 0, to: size, by: 8) {
  state ^= state << 13
  state ^= state >> 7
  state ^= state << 17
  buffer.storeBytes(of: state, toByteOffset: index, as: UInt64.self)
}

func now() -> Double {
  var time = timespec()
  clock_gettime(CLOCK_MONOTONIC, &time)
  return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

var rates: [Double] = []
var first: [UInt8] = []
for run in 1...3 {
  let start = now()
  var digest = makeDigest()
  // 1 MiB updates, as the forwarder feeds it from its read buffer.
  for offset in stride(from: 0, to: size, by: 1 << 20) {
    digest.update(UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + (1 << 20)]))
  }
  let result = digest.finalize()
  let seconds = now() - start
  if run == 1 { first = result } else { precondition(result == first) }
  let rate = Double(size) / 1e6 / seconds
  rates.append(rate)
  print("run \(run): \(Int(rate)) MB/s (\(Int(seconds * 1000)) ms)")
}
print("median: \(Int(rates.sorted()[1])) MB/s")
print("digest: " + first.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined())
