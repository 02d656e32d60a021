// swift-tools-version: 6.0
import PackageDescription

let upcoming: [SwiftSetting] = [
  .enableUpcomingFeature("ExistentialAny"),
  .enableUpcomingFeature("InternalImportsByDefault"),
  .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
  name: "BrowserDrop",
  platforms: [.macOS(.v15)],
  products: [
    .library(name: "BrowserDrop", targets: ["BrowserDrop"]),
    .library(name: "BrowserDropForwarding", targets: ["BrowserDropForwarding"]),
    .executable(name: "browserdrop", targets: ["browserdrop"]),
  ],
  targets: [
    // What Glibc does not export: epoll, eventfd, splice, accept4 flags, interface flags.
    .target(name: "CBrowserDropLinux"),
    .systemLibrary(name: "CMagic", pkgConfig: "libmagic", providers: [.apt(["libmagic-dev"])]),
    // libsmbclient, opened with dlopen the first time an SMB destination is used: only its header
    // (libsmbclient-dev) is needed to build. Not a pkg-config system library like the others:
    // SwiftPM puts a system library's `-lsmbclient` first on every product's link line, ahead of
    // any linker setting (so `--as-needed` can't drop it), and the ~105 libraries it needs would
    // be mapped at every start: 12 MiB of resident memory even when nothing goes to SMB.
    .target(name: "CSMBClientLoader"),
    .systemLibrary(
      name: "CQREncode", pkgConfig: "libqrencode", providers: [.apt(["libqrencode-dev"])]),
    // OpenSSL's SHA-256 (EVP) for delivery checks. Linked into every product like the others;
    // unlike libsmbclient it needs nothing but libc, and mapping it costs the idle server
    // well under 1 MiB of resident memory (docs/forwarding.md, "SHA-256").
    .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),

    // Turns Page/ into Swift string literals so the binary serves the page when copied alone.
    .executableTarget(name: "PageEmbedderTool", swiftSettings: upcoming),
    .plugin(
      name: "PageEmbedderPlugin", capability: .buildTool(),
      dependencies: ["PageEmbedderTool"], path: "Sources/PageEmbedderPlugin"),

    // Threads and a condition variable on pthreads, shared by both libraries (`package` access).
    .target(name: "BrowserDropThreads", swiftSettings: upcoming),
    .target(
      name: "BrowserDrop",
      dependencies: ["BrowserDropThreads", "CBrowserDropLinux", "CMagic"],
      swiftSettings: upcoming,
      plugins: ["PageEmbedderPlugin"]),
    .target(
      name: "BrowserDropForwarding",
      dependencies: ["BrowserDropThreads", "CSMBClientLoader", "CBrowserDropLinux", "CCrypto"],
      swiftSettings: upcoming),
    .executableTarget(
      name: "browserdrop",
      dependencies: [
        "BrowserDrop", "BrowserDropForwarding", "BrowserDropThreads", "CQREncode",
        "CBrowserDropLinux",
      ],
      swiftSettings: upcoming),

    // The seed's quick start as a Linux program (Examples/EmbeddedHost); built by CI.
    .executableTarget(
      name: "EmbeddedHost", dependencies: ["BrowserDrop"], path: "Examples/EmbeddedHost",
      swiftSettings: upcoming),

    // The seed's Quick start, unchanged (Examples/SeedQuickStart); run by SeedQuickStartTests.
    .executableTarget(
      name: "SeedQuickStart", dependencies: ["BrowserDrop"], path: "Examples/SeedQuickStart",
      swiftSettings: upcoming),

    // Drives a real server from the browser tests (Tests/Browser): JSON events out, commands in.
    .executableTarget(
      name: "BrowserDropTestHost", dependencies: ["BrowserDrop"], path: "Tests/BrowserDropTestHost",
      swiftSettings: upcoming),

    .testTarget(
      name: "BrowserDropTests", dependencies: ["BrowserDrop", "CBrowserDropLinux"],
      swiftSettings: upcoming),
    .testTarget(
      name: "BrowserDropForwardingTests", dependencies: ["BrowserDropForwarding"],
      swiftSettings: upcoming),
    .testTarget(
      name: "BrowserDropCommandTests", dependencies: ["browserdrop"],
      swiftSettings: upcoming),
  ]
)

// libFuzzer targets (Fuzz/, scripts/fuzz.sh), part of the package only with BROWSERDROP_FUZZ=1:
// the library is then instrumented and libFuzzer drives them. They read internals through
// `@testable import`, which a release build (`swift build -c release`) could not compile.
let fuzzing = Context.environment["BROWSERDROP_FUZZ"] == "1"
let fuzzFlags: [SwiftSetting] = fuzzing ? [.unsafeFlags(["-sanitize=fuzzer,address"])] : []
let fuzzTargetFlags: [SwiftSetting] = fuzzing ? [.define("BROWSERDROP_FUZZ")] : []
// libFuzzer without its `main` (the program's own top level calls LLVMFuzzerRunDriver), so
// SwiftPM's renamed entry point of testable executables keeps working.
let fuzzLinkFlags: [LinkerSetting] =
  fuzzing
  ? [
    .unsafeFlags([
      "-sanitize=address", "-use-ld=lld", "-Xlinker",
      Context.environment["BROWSERDROP_FUZZ_LIB"] ?? "libclang_rt.fuzzer_no_main.a", "-lstdc++",
    ])
  ] : []
package.targets.first { $0.name == "BrowserDrop" }?.swiftSettings?.append(contentsOf: fuzzFlags)
for name in ["FuzzRequestHead", "FuzzUploadPath", "FuzzHostPolicy"] where fuzzing {
  package.targets.append(
    .executableTarget(
      name: name, dependencies: ["BrowserDrop"], path: "Fuzz/\(name)",
      swiftSettings: upcoming + fuzzFlags + fuzzTargetFlags, linkerSettings: fuzzLinkFlags))
}
