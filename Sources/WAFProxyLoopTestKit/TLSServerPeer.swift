import CLibSSL
import NIOCore
import WAFProxyLoop

/// A libssl server context for a certificate chain and its key, freed with it: the other end of
/// the proxy loop's TLS client in tests and in the relay's fuzz target. Sendable as libssl's
/// `SSL_CTX` is: sessions may be made from it on any thread; `limit` belongs to its set-up.
public final class TLSServerContext: @unchecked Sendable {
    let context: OpaquePointer

    /// Nil when libssl refuses the files (missing, or a key that does not match).
    public init?(certificateChain: String, key: String) {
        guard let context = SSL_CTX_new(TLS_server_method()) else { return nil }
        guard SSL_CTX_use_certificate_chain_file(context, certificateChain) == 1,
            SSL_CTX_use_PrivateKey_file(context, key, SSL_FILETYPE_PEM) == 1
        else {
            SSL_CTX_free(context)
            return nil
        }
        self.context = context
    }

    deinit {
        SSL_CTX_free(context)
    }

    /// Offers no TLS version above `version` (`TLS1_2_VERSION`, …), for a test of one version.
    public func limit(toVersion version: Int32) {
        _ = waf_ssl_ctx_set_max_version(context, version)
    }
}

/// A TLS server session of libssl over a BIO pair, for a client to talk to without a socket: what
/// the client sends goes in with `receive`, what the server sends comes out of `takeCiphertext`.
public final class TLSServerPeer {
    private let session: OpaquePointer
    private let network: OpaquePointer
    /// Held: the session refers to it.
    private let context: TLSServerContext

    public init(_ context: TLSServerContext) {
        self.context = context
        session = SSL_new(context.context)
        var inner: OpaquePointer?
        var outer: OpaquePointer?
        BIO_new_bio_pair(&inner, 0, &outer, 0)
        SSL_set_bio(session, inner, inner)
        network = outer!
        SSL_set_accept_state(session)
    }

    deinit {
        SSL_set_quiet_shutdown(session, 1)
        SSL_shutdown(session)
        BIO_free(network)
        SSL_free(session)
    }

    public func receive(_ bytes: ByteBuffer) {
        _ = bytes.withUnsafeReadableBytes { BIO_write(network, $0.baseAddress, Int32($0.count)) }
    }

    /// Reads what it can (which drives its handshake), returning the plaintext.
    public func readBytes() -> [UInt8] {
        var chunk = [UInt8](repeating: 0, count: 65536)
        var out: [UInt8] = []
        while true {
            let count = SSL_read(session, &chunk, Int32(chunk.count))
            guard count > 0 else { break }
            out += chunk[0..<Int(count)]
        }
        return out
    }

    public func read() -> String {
        String(decoding: readBytes(), as: UTF8.self)
    }

    public func write(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        _ = bytes.withUnsafeBytes { SSL_write(session, $0.baseAddress, Int32($0.count)) }
    }

    public func write(_ text: String) {
        write(Array(text.utf8))
    }

    public func takeCiphertext() -> ByteBuffer {
        var bytes = ByteBuffer()
        let pending = Int(BIO_ctrl_pending(network))
        bytes.writeWithUnsafeMutableBytes(minimumWritableBytes: max(pending, 1)) { max(0, Int(BIO_read(network, $0.baseAddress, Int32(pending)))) }
        return bytes
    }

    /// Carries records between `client` and this server until neither has more (20 rounds at
    /// most); the server's to the client `split` bytes at a time. Returns what the server read.
    public func exchange(with client: TLSClientSession, split: Int = .max) -> [UInt8] {
        var serverSaw: [UInt8] = []
        for _ in 0..<20 {
            var moved = false
            if let bytes = client.takeCiphertext() {
                receive(bytes)
                moved = true
            }
            serverSaw += readBytes()
            var reply = takeCiphertext()
            if reply.readableBytes > 0 { moved = true }
            while reply.readableBytes > 0 { client.receive(reply.readSlice(length: min(max(split, 1), reply.readableBytes))!) }
            if !moved { break }
        }
        return serverSaw
    }
}
