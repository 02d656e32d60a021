// swift-tools-version: 6.0
// The forwarding benchmark's driver, kept out of the main package. Run Benchmarks/forwarding.sh.
import PackageDescription

let package = Package(
  name: "ForwardingBenchmark",
  platforms: [.macOS(.v15)],
  dependencies: [.package(name: "BrowserDrop", path: "../..")],
  targets: [
    .executableTarget(
      name: "fwdbench",
      dependencies: [.product(name: "BrowserDropForwarding", package: "BrowserDrop")])
  ]
)
