import FoundationEssentials
import FuzzSupport
import WAFTokenCore

@testable import WAFTokenStorage

// The state file: any bytes. Properties: nothing traps; a record that decodes holds a token fit
// for a cookie, and loading it into a provider's machine, with whatever date it carries, traps
// nowhere and never makes an untrustworthy date fresh (TOK-8).

private let configuration = try! WAFConfiguration(
    applicationIntegrationUrl: "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/", domainName: "example.com")

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafeRawPointer, _ size: Int) -> CInt {
    guard let record = StateStore.decode(Array(UnsafeRawBufferPointer(start: data, count: size))) else { return 0 }
    var machine = ProviderMachine(settings: .init(configuration: configuration))
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    _ = machine.handle(
        .start(restored: .init(value: record.value, fetchedAt: record.fetchedAt)), at: .init(monotonic: .origin, wall: now, randomUnit: 0.5))
    let status = machine.status(at: .init(monotonic: .origin, wall: now, randomUnit: 0.5))
    let trusted = record.fetchedAt >= Date(timeIntervalSince1970: 1_577_836_800) && record.fetchedAt <= now
    if !trusted, status.token?.stale == false { violated("a token dated \(record.fetchedAt.timeIntervalSince1970) loaded as fresh") }
    return 0
}
