import FoundationEssentials
import FuzzSupport
import NIOCore
import NIOHTTP1

@testable import WAFLocalTokenService

// The local token service's requests: any target, method and body. Properties: nothing traps, and
// with no fault armed every request gets an answer (never a drop or a stall).

private let service = try! LocalTokenService(configuration: LocalTokenServiceConfiguration(difficulty: 0))
private let methods: [HTTPMethod] = [.GET, .POST, .DELETE, .PUT, .HEAD]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafeRawPointer, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let paths = [
        service.pathPrefix + "/inputs", service.pathPrefix + "/verify", "/protected/x", "/__admin/counters", "/__admin/tokens", "/elsewhere",
    ]
    let method = methods[input.choose(methods.count)]
    var target = paths[input.choose(paths.count)]
    if input.byte() & 1 == 1 { target += "?" + String(decoding: input.take(input.choose(32)), as: UTF8.self) }
    var headers = HTTPHeaders()
    if input.byte() & 1 == 1 { headers.add(name: "Cookie", value: "aws-waf-token=" + String(decoding: input.take(input.choose(64)), as: UTF8.self)) }
    if input.byte() & 1 == 1 { headers.add(name: "Host", value: String(decoding: input.take(input.choose(32)), as: UTF8.self)) }
    let body = input.rest()
    let request = NIOHTTPServerRequestFull(
        head: HTTPRequestHead(version: .http1_1, method: method, uri: target, headers: headers),
        body: body.isEmpty ? nil : ByteBuffer(bytes: body))
    let (reply, _, counted) = service.reply(to: request)
    if counted { service.callFinished() }
    switch reply {
    case .send: break
    case .drop, .stall, .trickle: violated("no answer, or one dripped, to \(method) \(target) with no fault armed")
    }
    return 0
}
