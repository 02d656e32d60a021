struct KioskCommand {
  let options: CommandOptions
  let reporter: any Reporter
  func run() async -> Int32 { 1 }
}
