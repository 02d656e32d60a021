import CQREncode

/// A QR code drawn with Unicode half blocks: each character cell holds two modules, one above
/// the other, black on white whatever the terminal's colours, with the quiet zone of 4 light
/// modules all round that the QR specification asks for.
enum QRCode {
  /// The lines of the code for `text`, or `nil` when libqrencode can't encode it.
  static func lines(for text: String, margin: Int = 4) -> [String]? {
    guard let code = QRcode_encodeString(text, 0, QR_ECLEVEL_M, QR_MODE_8, 1) else { return nil }
    defer { QRcode_free(code) }
    let width = Int(code.pointee.width)
    guard let data = code.pointee.data else { return nil }
    func isDark(_ x: Int, _ y: Int) -> Bool {
      x >= 0 && y >= 0 && x < width && y < width && data[y * width + x] & 1 == 1
    }
    var lines: [String] = []
    for y in stride(from: -margin, to: width + margin, by: 2) {
      var line = "\u{1B}[30;107m"
      for x in -margin..<(width + margin) {
        switch (isDark(x, y), isDark(x, y + 1)) {
        case (true, true): line += "█"
        case (true, false): line += "▀"
        case (false, true): line += "▄"
        case (false, false): line += " "
        }
      }
      lines.append(line + "\u{1B}[0m")
    }
    return lines
  }
}
