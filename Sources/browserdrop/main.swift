// browserdrop: receive files from any browser on the local network and forward them to a folder
// or an SMB share. See `browserdrop --help` and docs/command.md.
import FoundationEssentials
import Glibc

let command: ParsedCommand
do {
  command = try ArgumentParser.parse(
    Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment)
} catch {
  StandardOutput.error.write(
    "browserdrop: error: \(error.message)\n"
      + "Usage: browserdrop [--to DEST] [options]\n"
      + "  See 'browserdrop --help' for the options.\n")
  exitAfterOutput(2)
}
// The password was read into the destination; children need not inherit it.
unsetenv("BROWSERDROP_SMB_PASSWORD")

/// Exits with `status` once everything queued for standard output and standard error is written.
func exitAfterOutput(_ status: Int32) -> Never {
  StandardOutput.shared.flush()
  exit(status)
}

switch command {
case .help:
  StandardOutput.shared.write(HelpText.help)
  exitAfterOutput(0)
case .version:
  StandardOutput.shared.line("browserdrop \(HelpText.version)")
  exitAfterOutput(0)
case .run(let options):
  signal(SIGPIPE, SIG_IGN)
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
