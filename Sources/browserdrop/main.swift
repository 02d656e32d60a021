// browserdrop: receive files from any browser on the local network and forward them to a folder
// or an SMB share. See `browserdrop --help` and docs/command.md.
import FoundationEssentials
import Glibc

/// Exits with `status` once everything queued for standard output and standard error is written.
func exitAfterOutput(_ status: Int32) -> Never {
  StandardOutput.shared.flush()
  exit(status)
}

/// Writes a usage error to standard error and exits 2.
func exitWithUsageError(_ error: UsageError) -> Never {
  StandardOutput.error.write(
    "browserdrop: error: \(error.message)\n"
      + "Usage: browserdrop [--to DEST] [options]\n"
      + "  See 'browserdrop --help' for the options.\n")
  exitAfterOutput(2)
}

/// The options of the command line, or the end of the program for `--help`, `--version` and a
/// usage error. Two steps, as in swift-argument-parser: parsing, which does no I/O, then the
/// validation against files, folders, the environment and the rules across flags.
func commandOptions() -> CommandOptions {
  let parsed: ParsedCommandLine
  do {
    parsed = try ArgumentParser.parseWithoutValidating(Array(CommandLine.arguments.dropFirst()))
  } catch {
    exitWithUsageError(error)
  }
  switch parsed {
  case .request(.help):
    StandardOutput.shared.write(HelpText.help)
    exitAfterOutput(0)
  case .request(.version):
    StandardOutput.shared.line("browserdrop \(HelpText.version)")
    exitAfterOutput(0)
  case .run(let arguments):
    do {
      return try arguments.validated(environment: ProcessInfo.processInfo.environment)
    } catch {
      exitWithUsageError(error)
    }
  }
}

/// Runs the session or the kiosk with `options` and exits with its status.
func runCommand(_ options: CommandOptions) async -> Never {
  signal(SIGPIPE, SIG_IGN)
  // A file size limit (RLIMIT_FSIZE, systemd's LimitFSIZE=) fails the write that passes it with
  // EFBIG, which the upload answers as write_failed, instead of killing the whole process.
  signal(SIGXFSZ, SIG_IGN)
  OpenFileLimit.raise()
  let style = options.outputStyle(standardOutputIsTerminal: isatty(STDOUT_FILENO) == 1)
  let display = ReporterFactory.make(style: style, drawsQRCode: options.drawsQRCode)
  // systemd notify, the watchdog and --metrics watch every report (Operations/).
  let operations: Operations
  do {
    operations = try Operations(
      options: options, environment: ProcessInfo.processInfo.environment,
      warn: { StandardOutput.error.line("browserdrop: \($0)") })
  } catch {
    if options.json {
      display.report(.stopped(message: error.message, staging: nil))
    } else {
      StandardOutput.error.line("browserdrop: \(error.message)")
    }
    exitAfterOutput(1)
  }
  let reporter = operations.observing(display)
  let status =
    options.kiosk
    ? await KioskCommand(options: options, reporter: reporter, operations: operations).run()
    : await OneShotCommand(options: options, reporter: reporter).run()
  exitAfterOutput(status)
}

let checkedOptions = commandOptions()
// The password was read into the destination; children need not inherit it.
unsetenv("BROWSERDROP_SMB_PASSWORD")
await runCommand(checkedOptions)
