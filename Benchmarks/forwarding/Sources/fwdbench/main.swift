// fwdbench FOLDER DESTINATION: forwards FOLDER to DESTINATION (a path or an smb:// address;
// password from BROWSERDROP_SMB_PASSWORD; BROWSERDROP_VERIFY=sha256 reads every file back) and
// prints "seconds=… peak_rss_kib=…".
import BrowserDropForwarding
import Foundation

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
  FileHandle.standardError.write(Data("usage: fwdbench FOLDER DESTINATION\n".utf8))
  exit(2)
}
let folder = URL(fileURLWithPath: arguments[1])
let target = arguments[2]
let verify: Verification =
  ProcessInfo.processInfo.environment["BROWSERDROP_VERIFY"] == "sha256" ? .sha256 : .size
let started = ContinuousClock.now
do {
  if target.hasPrefix("smb://") {
    let password = ProcessInfo.processInfo.environment["BROWSERDROP_SMB_PASSWORD"]
    let credentials = URL(string: target)?.user.map {
      Credentials(username: $0, password: password ?? "")
    }
    let destination = try SMBDestination(target, credentials: credentials)
    _ = try await Forwarder().forward(folder: folder, to: destination, verify: verify)
  } else {
    let destination = LocalDestination(directory: URL(fileURLWithPath: target))
    _ = try await Forwarder().forward(folder: folder, to: destination, verify: verify)
  }
} catch {
  FileHandle.standardError.write(Data("fwdbench: \(error)\n".utf8))
  exit(1)
}
let elapsed = ContinuousClock.now - started
let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
let peak =
  status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }?
  .split(separator: " ").dropFirst().first ?? "?"
print("seconds=\(String(format: "%.3f", seconds)) peak_rss_kib=\(peak)")
