import BrowserDropSystem
import Glibc
import Testing

@testable import BrowserDrop

/// How an upload that stopped is reported and answered, without sockets or a full disk.
@Suite("Body failures: reasons and answers")
struct BodyFailureTests {
  @Test(arguments: [ENOSPC, EDQUOT])
  func aFullDiskIsInsufficientStorageAnsweredAsWriteFailed(code: Int32) {
    let failure = BodyFailure.streaming(SystemError(call: "write", code: code))
    #expect(failure.reason == .insufficientStorage)
    #expect(
      failure.refusal == Refusal(.writeFailed, "The disk filled up while the file was written."))
  }

  @Test func anotherWriteErrorNamesItsReason() {
    let error = SystemError(call: "splice", code: EIO)
    let failure = BodyFailure.streaming(error)
    #expect(failure.reason == .writeFailed(error.reason))
    #expect(
      failure.refusal == Refusal(.writeFailed, "The file couldn't be written: \(error.reason)."))
  }

  @Test func silenceCancellationAndALostPeerAreNotAnswered() {
    let timedOut = BodyFailure.streaming(Reactor.WaitError.timedOut)
    #expect(timedOut.reason == .timedOut && timedOut.refusal == nil)
    let cancelled = BodyFailure.streaming(CancellationError())
    #expect(cancelled.reason == .cancelled && cancelled.refusal == nil)
    struct Reset: Error {}
    let lost = BodyFailure.streaming(Reset())
    #expect(lost.reason == .connectionLost && lost.refusal == nil)
  }

  @Test func refusedContentIsAnsweredWhileTheRestIsDiscarded() {
    let failure = BodyFailure.refusedContent("An ELF program named .mp3.", unreadBody: 42)
    #expect(failure.reason == .unsupportedType("An ELF program named .mp3."))
    #expect(failure.refusal?.error == .unsupportedType)
    #expect(failure.unreadBody == 42)
  }
}
