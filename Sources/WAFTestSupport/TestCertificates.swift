import Foundation

/// A throw-away certificate authority and a server certificate for 127.0.0.1 and localhost, made
/// with the openssl command line in a temporary directory.
public struct TestCertificates {
    public let directory: URL
    public var authority: String { directory.appendingPathComponent("ca.pem").path }
    public var serverCertificate: String { directory.appendingPathComponent("server.pem").path }
    public var serverKey: String { directory.appendingPathComponent("server.key").path }

    public init() throws {
        directory = scratchPath("waf-tls")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try openssl(["req", "-x509"] + curve + ["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=waf-tokend test CA"])
        try openssl(["req"] + curve + ["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"])
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\n".write(to: directory.appendingPathComponent("san.ext"), atomically: true, encoding: .utf8)
        try openssl([
            "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "2", "-extfile", "san.ext",
        ])
    }

    /// openssl in `directory` (`env -C`: posix_spawn has no portable chdir), bounded.
    private func openssl(_ arguments: [String]) throws {
        let child = try SpawnedProcess(
            "/usr/bin/env", ["-C", directory.path, "/usr/bin/openssl"] + arguments, output: "/dev/null", diagnosed: false)
        guard child.waitForExitBlocking(timeout: .seconds(60)) == 0 else {
            child.signal(SIGKILL)
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "openssl \(arguments[0]) failed or took over 60 s"])
        }
    }
}
