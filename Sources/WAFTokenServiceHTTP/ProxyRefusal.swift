import AsyncHTTPClient
import NIOCore
import NIOPosix

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A forward proxy's refusal of a `CONNECT`, in one sentence with its status (EGRESS-3).
///
/// AsyncHTTPClient names a 407 but reports every other refusal (a 403 of an ACL, a 502 of a proxy
/// that cannot reach the host) as `invalidProxyResponse`, without the status an operator needs to
/// tell them apart. So after such a failure one more `CONNECT` is sent by hand, on a connection of
/// its own, only to read the status line; the attempt fails either way, as a network failure.
enum ProxyRefusal {
    /// The sentence for `error` when it is a proxy's refusal or silence; nil for any other error.
    static func describe(
        _ error: HTTPClientError, proxy: HTTPClient.Configuration.Proxy, url: String, timeout: Duration
    ) async -> String? {
        let target = authority(of: url)
        let name = proxy.host.contains(":") ? "[\(proxy.host)]:\(proxy.port)" : "\(proxy.host):\(proxy.port)"
        switch error {
        case .proxyAuthenticationRequired:
            return sentence(name, target, status: 407)
        case .invalidProxyResponse:
            return sentence(name, target, status: await status(of: proxy, target: target, within: timeout))
        case .httpProxyHandshakeTimeout:
            return "the forward proxy \(name) did not answer the CONNECT to \(target) in time"
        default:
            return nil
        }
    }

    private static func sentence(_ proxy: String, _ target: String, status: Int?) -> String {
        switch status {
        case 407?:
            return
                "the forward proxy \(proxy) refused the CONNECT to \(target) with 407 (proxy authentication required: see egress.proxyCredentialsFile)"
        case let status?:
            return "the forward proxy \(proxy) refused the CONNECT to \(target) with \(status)"
        case nil:
            return "the forward proxy \(proxy) refused the CONNECT to \(target) (its answer could not be read again)"
        }
    }

    /// `host:port` of `url`, as a `CONNECT` names it.
    static func authority(of url: String) -> String {
        let parsed = URLComponents(string: url)
        let secure = parsed?.scheme?.lowercased() == "https"
        let host = parsed?.host ?? url
        let port = parsed?.port ?? (secure ? 443 : 80)
        return host.contains(":") && !host.hasPrefix("[") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// The status the proxy answers a `CONNECT` to `target` with, or nil (no answer in time).
    static func status(of proxy: HTTPClient.Configuration.Proxy, target: String, within limit: Duration) async -> Int? {
        await withTaskGroup(of: Int??.self) { group in
            group.addTask { .some(try? await ask(proxy, target: target, within: limit)) }
            group.addTask {
                try? await Task.sleep(for: limit)
                return .none
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? nil
        }
    }

    private static func ask(_ proxy: HTTPClient.Configuration.Proxy, target: String, within limit: Duration) async throws -> Int? {
        // A connect does not heed the task's cancellation: its own time-out keeps the failed
        // fetch's report within the fetch's time-out.
        let bootstrap = ClientBootstrap(group: HTTPClient.defaultEventLoopGroup).connectTimeout(TimeAmount(limit))
        let channel = try await bootstrap.connect(host: proxy.host, port: proxy.port) {
            channel in
            channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
        }
        return try await channel.executeThenClose { inbound, outbound in
            var request = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n"
            if let authorization = proxy.authorization { request += "Proxy-Authorization: \(authorization.headerValue)\r\n" }
            try await outbound.write(ByteBuffer(string: request + "\r\n"))
            var line: [UInt8] = []
            for try await chunk in inbound {
                line += chunk.readableBytesView
                if line.contains(10) || line.count > 1024 { break }
            }
            // "HTTP/1.1 403 Forbidden"
            let fields = String(decoding: line.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self).split(separator: " ")
            guard fields.count >= 2, fields[0].hasPrefix("HTTP/") else { return nil }
            return Int(fields[1])
        }
    }
}
