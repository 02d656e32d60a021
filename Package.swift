// swift-tools-version: 6.0
import PackageDescription

let upcoming: [SwiftSetting] = [
  .enableUpcomingFeature("ExistentialAny"),
  .enableUpcomingFeature("InternalImportsByDefault"),
  .enableUpcomingFeature("MemberImportVisibility"),
]

// Linux only: the server is built on epoll, eventfd, splice and Glibc, so no Apple platform is
// declared (SwiftPM has no way to declare Linux; the system layer refuses to compile elsewhere).
let package = Package(
  name: "BrowserDrop",
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
    .target(name: "CSMBClientLoader", dependencies: ["CBrowserDropLinux"]),
    // libsystemd's sd_notify, opened with dlopen only when NOTIFY_SOCKET is set (under a
    // Type=notify unit): only its header (libsystemd-dev) is needed to build. Not a pkg-config
    // system library, for the reason given for libsmbclient above: linked, libsystemd and the
    // liblzma, libzstd, liblz4, libcap and libgcrypt it needs would be mapped at every start.
    .target(name: "CSystemdLoader"),
    // Avahi's client library, for `Configuration.localName` (--name): opened with dlopen only
    // when a name is asked for, for the same reason (libavahi-client, libavahi-common and
    // libdbus-1); header from libavahi-client-dev. Its publisher (a simple-poll loop on a thread
    // of the library's, bd-avahi) is C.
    .target(name: "CAvahiLoader"),
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

    // The system layer under both libraries and the command (`package` access): errno errors,
    // the EINTR/EAGAIN gate, owned descriptors, durable writes, named threads, blocking pools.
    .target(name: "BrowserDropSystem", dependencies: ["CBrowserDropLinux"], swiftSettings: upcoming),
    .target(
      name: "BrowserDrop",
      dependencies: ["BrowserDropSystem", "CBrowserDropLinux", "CMagic", "CAvahiLoader"],
      swiftSettings: upcoming,
      plugins: ["PageEmbedderPlugin"]),
    .target(
      name: "BrowserDropForwarding",
      dependencies: ["BrowserDropSystem", "CSMBClientLoader", "CBrowserDropLinux", "CCrypto"],
      swiftSettings: upcoming),
    .executableTarget(
      name: "browserdrop",
      dependencies: [
        "BrowserDrop", "BrowserDropForwarding", "BrowserDropSystem", "CQREncode",
        "CBrowserDropLinux", "CSystemdLoader",
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

    // Runs a server into environment failures (no descriptors, a failed epoll_wait) in a process
    // of its own, run by EnvironmentFailureTests; and record appends under a file size limit,
    // run by ManifestTests.
    .executableTarget(
      name: "BrowserDropFaultHost", dependencies: ["BrowserDrop", "BrowserDropSystem"],
      path: "Tests/BrowserDropFaultHost", swiftSettings: upcoming),

    // What the three test targets share: one HTTP client, one child-process runner, temporary
    // folders, ports, the loopback smbd. On the toolchain alone, no library of the package,
    // so a suite reaches the server, the binary or smbd only the way a real client would.
    .target(
      name: "BrowserDropTestSupport", path: "Tests/BrowserDropTestSupport", swiftSettings: upcoming
    ),
    .testTarget(
      name: "BrowserDropSystemTests", dependencies: ["BrowserDropSystem"],
      swiftSettings: upcoming),
    .testTarget(
      name: "BrowserDropTests",
      dependencies: [
        "BrowserDrop", "BrowserDropSystem", "CBrowserDropLinux", "CAvahiLoader",
        "BrowserDropTestSupport",
      ],
      swiftSettings: upcoming),
    .testTarget(
      name: "BrowserDropForwardingTests",
      dependencies: ["BrowserDropForwarding", "BrowserDropSystem", "BrowserDropTestSupport"],
      // Run by LateRenameTests with the .venv's Python.
      exclude: ["stalled_rename.py"],
      swiftSettings: upcoming),
    .testTarget(
      name: "BrowserDropCommandTests",
      dependencies: ["browserdrop", "BrowserDropSystem", "BrowserDropTestSupport"],
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
for name in ["FuzzRequestHead", "FuzzUploadPath", "FuzzHostPolicy", "FuzzRequestPolicy"]
where fuzzing {
  package.targets.append(
    .executableTarget(
      name: name, dependencies: ["BrowserDrop"], path: "Fuzz/\(name)",
      swiftSettings: upcoming + fuzzFlags + fuzzTargetFlags, linkerSettings: fuzzLinkFlags))
}
