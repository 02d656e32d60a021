/// The text of `browserdrop --help` and `--version`.
enum HelpText {
  /// The version printed by `--version`.
  static let version = "0.1.0"

  /// The help text, complete enough to use the command without the README.
  static let help = """
    OVERVIEW: Receive files from any browser on the local network.

    browserdrop serves an upload page on this computer. People on the same network open the
    address (or scan the QR code) and drop files or folders; what arrives complete is forwarded
    to a local folder or an SMB share. Nothing leaves the local network.

    USAGE: browserdrop [--to DEST] [options]
           browserdrop --kiosk --to DEST [options]

    DESTINATION:
      --to DEST               A local folder, or smb://[user@]host[:port]/share[/path].
                              Without --to the staged folder is kept and its path printed.
      --on-conflict POLICY    When a name is taken at the destination: rename (default,
                              "report.pdf" arrives as "report 2.pdf"), replace, or fail.
                              Folders always merge; the policy applies to each file.
      --batch-folder PATTERN  Put each batch in its own folder named after PATTERN, with
                              {date} (2025-03-14), {time} (09.26.53) and {n} (batch number).
                              Default "{date} {time}" in kiosk mode, none otherwise.
                              With an smb:// destination the pattern may not hold
                              \\ : * ? " < > | nor end in a dot or a space.
      --smb-password-file FILE
                              Read the SMB password from FILE (see SMB PASSWORDS).

    SERVER:
      --bind ADDRESS          Listen on this IP address only (default: all interfaces).
      --port N                TCP port (default 80, falling back to 8080 when 80 is taken
                              or not permitted; 0 picks a free port).
      --staging DIR           Where uploads wait (default: browserdrop in the temp folder).
                              Leftovers of crashed sessions there are removed at start.
      --max-connections N     Most connections open at once (default 64).
      --max-concurrent N      Uploads the page runs at once (default 3). Browsers open at
                              most 6 connections per host, so above 6 at most 6 run.
      --idle-timeout SECONDS  Close a connection silent for this long (default 30).
      --durability on|off     Flush each file to the disk before answering the upload
                              (default on). Off is faster; a power cut can then lose the
                              last files that were acknowledged.

    LIMITS:
      --content-check MODE    What each file's content may be, detected with libmagic:
                              disguised (default) refuses an executable or script named as
                              media, a document or text; off detects nothing; a list of MIME
                              patterns such as audio/*,application/pdf accepts only those.
      --allow EXT[,EXT...]    Accept only these extensions, case-insensitive (default: any).
      --max-file-size SIZE    Largest accepted file: bytes, or 500K / 20M / 8G / 1T
                              (binary units: 1K = 1024 bytes). Default: no limit.
      --reserve SIZE          Free space always left on the staging volume (default 1G).

    PAGE:
      --title TEXT            The page's title.
      --language CODE         The page's language, e.g. en, es, pt-BR.
      --accent #RRGGBB        The page's accent colour.
      --strings FILE.json     Replacement texts for the page, a JSON object of strings by
                              key, e.g. {"dropTitle": "Drop scans here"}. The keys:
                              \(PageStrings.helpLines)
                              {done}, {total} and {count} are filled in. With the bundled
                              page an unknown key is a usage error.
      --page DIR              Serve your own page from DIR (it must hold index.html) instead
                              of the bundled one. It must speak protocol v1: read its
                              settings from GET /config.json and send each file's bytes as
                              POST /upload?path=<relative path, percent-encoded>.

    KIOSK:
      --kiosk                 Serve continuously, in batches: a batch closes after the quiet
                              period with nothing in flight, is moved to the outbox (under the
                              staging folder) and forwarded; a new session starts at once on
                              the same port. Batches left by a crash are forwarded at start; a
                              destination that is down is retried with backoff.
      --quiet-period SECONDS  Kiosk: close a batch after this long without uploads (default 60).

    OPERATIONS:
      --name NAME             Advertise NAME.local and an _http._tcp service "BrowserDrop on
                              NAME" on the LAN through avahi-daemon (mDNS); a name taken by
                              another machine becomes NAME-2. Without avahi-daemon, one line
                              says so and the addresses work as before.
      --metrics ADDRESS:PORT  Serve GET /metrics (Prometheus text format) and GET /healthz on
                              a listener of their own (a bare PORT means 127.0.0.1:PORT; any
                              other address only when written out). Off by default.
      Under systemd (Type=notify) the kiosk sends READY=1, a STATUS= line and, with
      WatchdogSec=, WATCHDOG=1 from its event loop.

    OUTPUT:
      --json                  One JSON object per line on standard output instead of the
                              terminal display, its type under "event", with these fields:
                                listening         addresses: [{url, kind, interface}]
                                uploadStarted     path, size
                                uploadFinished    path, size, mimeType (or null), kind
                                uploadFailed      path, reason
                                addressesChanged  addresses
                                interrupted       (the listener was lost and is resumed)
                                finishing         (one-shot: Enter or a signal)
                                nothingArrived
                                batchClosed       batch, files, bytes (kiosk)
                                forwardStarted    destination
                                forwardProgress   files, totalFiles, bytes, totalBytes
                                forwarded         destination, files, bytes,
                                                  renamed: [{from, to}]
                                forwardFailed     message, staging (where files are kept)
                                retrying          seconds (kiosk)
                                kept              staging, files, bytes (no --to)
                                stopped           message, staging (or null)
                                notice            message
      --no-qr                 Don't draw the QR code of the first address.

    GENERAL:
      -h, --help              Show this help.
      --version               Show the version.

    ONE-SHOT MODE (the default):
      Press Enter, or send SIGINT (Ctrl-C) or SIGTERM, to finish: uploads still in flight are
      dropped, complete files are forwarded to --to and a summary is printed. End of input is
      ignored. A second Ctrl-C while forwarding stops it and keeps the staged folder.

    SMB PASSWORDS:
      Never on the command line. When the address names a user, the password is read from
      --smb-password-file FILE, else the BROWSERDROP_SMB_PASSWORD environment variable, else
      the systemd credential "smb-password" ($CREDENTIALS_DIRECTORY/smb-password, see
      LoadCredential=); an empty variable counts as unset. A user with no password from any
      of these is a usage error. Without a user in the address, guest access is used. An address
      with a password in it (smb://user:password@host/…) is refused, and the password is
      never printed.

    EXIT STATUS:
      0  finished (and forwarded, when --to was given)
      1  the server couldn't start, or forwarding failed (the staged folder is kept)
      2  a usage error
      130 / 143  stopped by a second SIGINT / SIGTERM while forwarding (the folder is kept)

    EXAMPLES:
      browserdrop --to ~/Inbox
      browserdrop --to ~/Music --allow mp3,m4a,flac --max-file-size 2G
      BROWSERDROP_SMB_PASSWORD=… browserdrop --to smb://anna@nas.local/drops
      browserdrop --kiosk --quiet-period 120 --to smb://intake@192.168.1.50/scans --json

    """
}
