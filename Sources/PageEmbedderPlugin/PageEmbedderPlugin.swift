import Foundation
import PackagePlugin

/// Generates `BundledPageFiles.swift` from the package's top-level `Page/` folder, so the page
/// travels inside the binary.
@main
struct PageEmbedderPlugin: BuildToolPlugin {
  func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
    let pageDirectory = context.package.directoryURL.appending(path: "Page")
    let output = context.pluginWorkDirectoryURL.appending(path: "BundledPageFiles.swift")
    var inputs: [URL] = []
    if let walker = FileManager.default.enumerator(
      at: pageDirectory, includingPropertiesForKeys: [.isRegularFileKey])
    {
      for case let url as URL in walker
      where (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
        inputs.append(url)
      }
    }
    return [
      .buildCommand(
        displayName: "Embedding the upload page",
        executable: try context.tool(named: "PageEmbedderTool").url,
        arguments: [pageDirectory.path, output.path],
        inputFiles: inputs.sorted { $0.path < $1.path },
        outputFiles: [output])
    ]
  }
}
