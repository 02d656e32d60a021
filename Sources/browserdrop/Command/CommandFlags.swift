import BrowserDrop

/// Every flag of `browserdrop`, each declared once, in the order `--help` lists them.
enum CommandFlags {
  /// The flags; `ArgumentParser` reads the command line with them and `HelpText` lists them.
  static let all: [Flag] = [
    .option(
      "--to", "DEST", expected: "a folder or an smb:// address", section: .destination,
      help: [
        "A local folder, or smb://[user@]host[:port]/share[/path].",
        "Without --to the staged folder is kept and its path printed.",
      ],
      parse: FlagValue.asWritten, into: \.destinationText),
    .option(
      "--on-conflict", "POLICY", expected: "rename, replace or fail", section: .destination,
      help: [
        "When a name is taken at the destination: rename (default,",
        "\"report.pdf\" arrives as \"report 2.pdf\"), replace, or fail.",
        "Folders always merge; the policy applies to each file.",
      ],
      parse: FlagValue.collisionPolicy, into: \.collisionPolicy),
    .option(
      "--batch-folder", "PATTERN",
      expected: "a folder name pattern such as \"{date} {time}\"", section: .destination,
      help: [
        "Put each batch in its own folder named after PATTERN, with",
        "{date} (2025-03-14), {time} (09.26.53) and {n} (batch number).",
        "Default \"{date} {time}\" in kiosk mode, none otherwise.",
        "With an smb:// destination the pattern may not hold",
        #"\ : * ? " < > | nor end in a dot or a space."#,
      ],
      parse: { _, text throws(UsageError) in try BatchFolderPattern(text) }, into: \.batchFolder),
    .option(
      "--smb-password-file", "FILE", expected: "a file holding the SMB password",
      section: .destination,
      help: ["Read the SMB password from FILE (see SMB PASSWORDS)."],
      parse: FlagValue.nonEmpty("a file"), into: \.smbPasswordFile),
    .option(
      "--bind", "ADDRESS", expected: "an IP address to listen on", section: .server,
      help: ["Listen on this IP address only (default: all interfaces)."],
      parse: FlagValue.ipAddress, into: \.bindAddress),
    .option(
      "--port", "N", expected: "a port number", section: .server,
      help: [
        "TCP port (default 80, falling back to 8080 when 80 is taken",
        "or not permitted; 0 picks a free port).",
      ],
      parse: FlagValue.integer(in: 0...65535, expected: "a port number from 0 to 65535"),
      into: \.port),
    .option(
      "--staging", "DIR", expected: "a folder", section: .server,
      help: [
        "Where uploads wait (default: browserdrop in the temp folder).",
        "Leftovers of crashed sessions there are removed at start.",
      ],
      parse: FlagValue.nonEmpty("a folder"), into: \.stagingPath),
    .option(
      "--max-connections", "N", expected: "a whole number", section: .server,
      help: ["Most connections open at once (default 64)."],
      parse: FlagValue.integer(in: 1...100_000, expected: "a whole number of at least 1"),
      into: \.maximumConnections),
    .option(
      "--max-concurrent", "N", expected: "a whole number", section: .server,
      help: [
        "Uploads the page runs at once (default 3). Browsers open at",
        "most 6 connections per host, so above 6 at most 6 run.",
      ],
      parse: FlagValue.integer(in: 1...64, expected: "a whole number from 1 to 64"),
      into: \.maximumConcurrentUploads),
    .option(
      "--idle-timeout", "SECONDS", expected: "a number of seconds", section: .server,
      help: ["Close a connection silent for this long (default 30)."],
      parse: FlagValue.seconds, into: \.idleTimeout),
    .option(
      "--durability", "on|off", expected: "on or off", section: .server,
      help: [
        "Flush each file to the disk before answering the upload",
        "(default on). Off is faster; a power cut can then lose the",
        "last files that were acknowledged.",
      ],
      parse: FlagValue.onOff, into: \.durability),
    .option(
      "--content-check", "MODE",
      expected: "disguised, off, or MIME patterns such as audio/*,application/pdf",
      section: .limits,
      help: [
        "What each file's content may be, detected with libmagic:",
        "disguised (default) refuses an executable or script named as",
        "media, a document or text; off detects nothing; a list of MIME",
        "patterns such as audio/*,application/pdf accepts only those.",
      ],
      parse: FlagValue.contentPolicy, into: \.contentPolicy),
    .option(
      "--allow", "EXT[,EXT...]", expected: "extensions separated by commas", section: .limits,
      help: ["Accept only these extensions, case-insensitive (default: any)."],
      parse: FlagValue.extensions, into: \.allowedExtensions),
    .option(
      "--max-file-size", "SIZE", expected: "a size such as 500K, 20M, 8G or 1T",
      section: .limits,
      help: [
        "Largest accepted file: bytes, or 500K / 20M / 8G / 1T",
        "(binary units: 1K = 1024 bytes). Default: no limit.",
      ],
      parse: FlagValue.size(allowZero: false), into: \.maximumFileSize),
    .option(
      "--reserve", "SIZE", expected: "a size such as 500M or 1G", section: .limits,
      help: ["Free space always left on the staging volume (default 1G)."],
      parse: FlagValue.size(allowZero: true), into: \.reservedFreeSpace),
    .option(
      "--title", "TEXT", expected: "the page's title", section: .page,
      help: ["The page's title."],
      parse: FlagValue.nonEmpty("a title can't be empty"), into: \.pageSettings.title),
    .option(
      "--language", "CODE", expected: "a language code such as en or pt-BR", section: .page,
      help: ["The page's language, e.g. en, es, pt-BR."],
      parse: FlagValue.language, into: \.pageSettings.language),
    .option(
      "--accent", "#RRGGBB", expected: "a colour as #RRGGBB", section: .page,
      help: ["The page's accent colour."],
      parse: FlagValue.accent, into: \.pageSettings.accentColor),
    .option(
      "--strings", "FILE.json", expected: "a JSON file", section: .page,
      help: [
        "Replacement texts for the page, a JSON object of strings by",
        "key, e.g. {\"dropTitle\": \"Drop scans here\"}. The keys:",
      ] + PageStrings.helpLines + [
        "{done}, {total} and {count} are filled in. With the bundled",
        "page an unknown key is a usage error.",
      ],
      parse: FlagValue.asWritten, appendingTo: \.stringsFiles),
    .option(
      "--page", "DIR", expected: "a folder holding index.html", section: .page,
      help: [
        "Serve your own page from DIR (it must hold index.html) instead",
        "of the bundled one. It must speak protocol v1: read its",
        "settings from GET /config.json and send each file's bytes as",
        "POST /upload?path=<relative path, percent-encoded>.",
      ],
      parse: FlagValue.asWritten, appendingTo: \.pageFolders),
    .toggle(
      "--kiosk", section: .kiosk,
      help: [
        "Serve continuously, in batches: a batch closes after the quiet",
        "period with nothing in flight, is moved to the outbox (under the",
        "staging folder) and forwarded; a new session starts at once on",
        "the same port. Batches left by a crash are forwarded at start; a",
        "destination that is down is retried with backoff.",
      ],
      setting: \.kiosk, to: true),
    .option(
      "--quiet-period", "SECONDS", expected: "a number of seconds", section: .kiosk,
      help: ["Kiosk: close a batch after this long without uploads (default 60)."],
      parse: FlagValue.seconds, into: \.quietPeriod),
    .option(
      "--name", "NAME", expected: "a name to advertise as NAME.local", section: .operations,
      help: [
        "Advertise NAME.local and an _http._tcp service \"BrowserDrop on",
        "NAME\" on the LAN through avahi-daemon (mDNS); a name another",
        "machine has becomes NAME-2. Without avahi-daemon, one line says",
        "so and the addresses work as before.",
      ],
      parse: OperationsFlags.name, into: \.advertisedName),
    .option(
      "--metrics", "ADDRESS:PORT", expected: "a port or ADDRESS:PORT", section: .operations,
      help: [
        "Serve GET /metrics (Prometheus text format) and GET /healthz on a",
        "listener of their own; a bare PORT means 127.0.0.1:PORT, another",
        "address only when written out. Off by default. Under systemd",
        "(Type=notify) browserdrop also sends READY=1, a STATUS= line and,",
        "with WatchdogSec=, WATCHDOG=1 from its event loop.",
      ],
      parse: OperationsFlags.metrics, into: \.metrics),
    .toggle(
      "--json", section: .output,
      help: [
        "One JSON object per line on standard output instead of the",
        "terminal display, its type under \"event\", with these fields:",
        "  listening         addresses: [{url, kind, interface}]",
        "  uploadStarted     path, size",
        "  uploadFinished    path, size, mimeType (or null), kind",
        "  uploadFailed      path, reason",
        "  uploadPaused      path, size, receivedBytes (cut off, kept to resume)",
        "  uploadResumed     path, size, offset",
        "  uploadCarriedOver path, size, receivedBytes (kiosk: paused as a",
        "                    batch closed; it continues in the next one)",
        "  addressesChanged  addresses",
        "  interrupted       (the listener was lost and is resumed)",
        "  finishing         (one-shot: Enter or a signal)",
        "  nothingArrived",
        "  batchClosed       batch, files, bytes, handedOver (kiosk;",
        "                    handedOver: connections waiting as it closed,",
        "                    answered by the next batch's session)",
        "  forwardStarted    destination",
        "  forwardProgress   files, totalFiles, bytes, totalBytes",
        "  forwarded         destination, files, bytes,",
        "                    renamed: [{from, to}]",
        "  forwardFailed     message, staging (where files are kept)",
        "  retrying          seconds (kiosk)",
        "  kept              staging, files, bytes (no --to)",
        "  stopped           message, staging (or null)",
        "  notice            message",
      ],
      setting: \.json, to: true),
    .toggle(
      "--no-qr", section: .output, help: ["Don't draw the QR code of the first address."],
      setting: \.drawsQRCode, to: false),
    .request("--help", shortName: "-h", .help, section: .general, help: ["Show this help."]),
    .request("--version", .version, section: .general, help: ["Show the version."]),
  ]

  /// The flag named `name` (`--port`, or `-h`), if there is one.
  static func named(_ name: String) -> Flag? {
    all.first { $0.name == name || $0.shortName == name }
  }
}
