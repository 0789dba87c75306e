import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

@testable import WAFDaemonConfiguration

/// deploy/kubernetes/: the manifests parse, and every command and path they give waf-tokend's
/// container exists in the image.
@Suite("Kubernetes manifests", .offPool)
struct KubernetesManifestTests {
    static let directory = repositoryDirectory.appendingPathComponent("deploy/kubernetes")

    static func load(_ name: String) throws -> YAMLNode {
        let bytes = try Array(Data(contentsOf: directory.appendingPathComponent(name)))
        return try #require(try YAMLDocument.parse(bytes))
    }

    @Test("the configuration in the ConfigMap is valid for waf-tokend")
    func configMap() throws {
        let map = try Self.load("configmap.yaml")
        let text = try #require(map["data"]?["waf-tokend.yaml"]?.text)
        let file = scratchPath("waf-configmap").appendingPathExtension("yaml")
        try text.write(to: file, atomically: true, encoding: .utf8)
        let loaded = ConfigurationLoader.load(ConfigurationSources(file: file.path))
        #expect(throws: Never.self) { try loaded.get() }
        #expect(try loaded.get()[Keys.socketPath] == "/run/waf-tokend/token.sock")
    }

    @Test("the pod: a native sidecar (restartPolicy Always), probes httpGet on metrics.listen, the socket on a shared emptyDir")
    func pod() throws {
        let pod = try Self.load("pod.yaml")
        let sidecar = try #require(pod["spec"]?["initContainers"]?.items.first)
        #expect(sidecar["restartPolicy"]?.text == "Always")
        try Self.probesOnTheMetricsPort(sidecar, configMap: "configmap.yaml")
        #expect(sidecar["resources"]?["limits"]?["memory"]?.text == "64Mi", "the systemd unit's MemoryMax")
        let app = try #require(pod["spec"]?["containers"]?.items.first)
        #expect(app["volumeMounts"]?.items.contains { $0["mountPath"]?.text == "/run/waf-tokend" } == true, "the app sees the socket")
        let volumes = pod["spec"]?["volumes"]?.items ?? []
        #expect(volumes.contains { $0["name"]?.text == "waf-token-socket" && $0["emptyDir"] != nil })
    }

    @Test("MULTI-7: the node agent for two tenants: two providers, each for its tenant's group only; each app in its group asks for its own")
    func MULTI7_tenantsExample() throws {
        let map = try Self.load("tenants/configmap.yaml")
        let text = try #require(map["data"]?["waf-tokend.yaml"]?.text)
        let file = scratchPath("waf-tenants").appendingPathExtension("yaml")
        try text.write(to: file, atomically: true, encoding: .utf8)
        let config = try ConfigurationLoader.load(ConfigurationSources(file: file.path)).get()
        #expect(config.providers.map(\.name) == ["pay", "shop"])
        let groups = Dictionary(uniqueKeysWithValues: config.providers.map { ($0.domainName, $0[Keys.providerAllowedGroups] ?? []) })
        #expect(groups == ["shop.example.com": ["3001"], "pay.example.com": ["3002"]])
        // Each tenant's files are its group's, and the daemon is a member of every tenant's group.
        for provider in config.providers {
            #expect(provider[Keys.sinksGroup].map { [$0] } == provider[Keys.providerAllowedGroups], "\(provider.name): its files are its group's")
            #expect(provider[Keys.sinksTokenFile] != nil && provider[Keys.sinksCookieJar] != nil, "\(provider.name): files of its own")
        }
        let daemonSet = try Self.load("tenants/daemonset.yaml")
        let supplemental = daemonSet["spec"]?["template"]?["spec"]?["securityContext"]?["supplementalGroups"]?.items.compactMap(\.text) ?? []
        #expect(Set(supplemental) == Set(config.providers.flatMap { $0[Keys.providerAllowedGroups] ?? [] }), "\(supplemental)")
        #expect(
            daemonSet["spec"]?["template"]?["spec"]?["volumes"]?.items.contains { $0["configMap"]?["name"]?.text == "waf-tokend-tenants" } == true)
        for app in try Self.load("tenants/apps.yaml")["items"]?.items ?? [] {
            let spec = app["spec"]?["template"]?["spec"]
            let group = try #require(spec?["securityContext"]?["runAsGroup"]?.text)
            let url = try #require(spec?["containers"]?.items.first?["env"]?.items.first { $0["name"]?.text == "WAF_TOKEN_URL" }?["value"]?.text)
            let query = try #require(url.split(separator: "?").last).split(separator: "=").map(String.init)
            let provider = try #require(config.providers.first { query[0] == "provider" ? $0.name == query[1] : $0.domainName == query[1] })
            #expect(provider[Keys.providerAllowedGroups] == [group], "\(app["metadata"]?["name"]?.text ?? "?") asks for a provider of its own group")
        }
    }

    @Test("every command and path given to waf-tokend's containers exists in the image")
    func pathsExistInTheImage() async throws {
        let files = try await Packaging.imageFiles()
        for name in ["pod.yaml", "daemonset.yaml", "tenants/daemonset.yaml"] {
            let manifest = try Self.load(name)
            let spec = manifest["spec"]?["template"]?["spec"] ?? manifest["spec"]
            let containers = (spec?["initContainers"]?.items ?? []) + (spec?["containers"]?.items ?? [])
            for container in containers where container["image"]?.text?.contains("waf-tokend") == true {
                for probe in ["readinessProbe", "startupProbe", "livenessProbe"] {
                    guard let command = container[probe]?["exec"]?["command"]?.items.first?.text else { continue }
                    #expect(files.contains(command), "\(name): \(probe) runs \(command)")
                }
                for mount in container["volumeMounts"]?.items ?? [] {
                    let path = try #require(mount["mountPath"]?.text)
                    #expect(files.contains(path), "\(name): the image has \(path)")
                }
                let arguments = container["args"]?.items.compactMap(\.text) ?? []
                if let config = arguments.firstIndex(of: "--config").map({ arguments[$0 + 1] }) {
                    #expect(files.contains(config), "\(name): --config \(config)")
                }
            }
        }
        #expect(files.contains("/usr/sbin/waf-tokend"))
    }

    /// Every probe of `container` is an httpGet of /healthz on the port named metrics, which is the
    /// port metrics.listen has in `configMap`'s configuration; the PodMonitor scrapes that port.
    static func probesOnTheMetricsPort(_ container: YAMLNode, configMap: String) throws {
        let port = try #require(container["ports"]?.items.first { $0["name"]?.text == "metrics" }?["containerPort"]?.text)
        let text = try #require(try Self.load(configMap)["data"]?["waf-tokend.yaml"]?.text)
        let file = scratchPath("waf-configmap").appendingPathExtension("yaml")
        try text.write(to: file, atomically: true, encoding: .utf8)
        let configuration = try ConfigurationLoader.load(ConfigurationSources(file: file.path)).get()
        #expect(configuration[Keys.metricsListen]?.description == "0.0.0.0:\(port)", "\(configMap): metrics.listen on the container's port")
        for probe in ["readinessProbe", "startupProbe", "livenessProbe"] {
            guard let get = container[probe] else { continue }
            #expect(get["httpGet"]?["path"]?.text == "/healthz" && get["httpGet"]?["port"]?.text == "metrics", "\(probe)")
        }
        #expect(container["readinessProbe"] != nil)
        let monitor = try Self.load("podmonitor.yaml")
        #expect(monitor["spec"]?["podMetricsEndpoints"]?.items.first?["port"]?.text == "metrics")
    }

    @Test("the DaemonSets probe metrics.listen over HTTP too, and the PodMonitor selects every waf-tokend pod")
    func daemonSetProbesAndMonitor() throws {
        for (name, configMap) in [("daemonset.yaml", "configmap.yaml"), ("tenants/daemonset.yaml", "tenants/configmap.yaml")] {
            let container = try #require(try Self.load(name)["spec"]?["template"]?["spec"]?["containers"]?.items.first)
            try Self.probesOnTheMetricsPort(container, configMap: configMap)
        }
        let selected =
            try Self.load("podmonitor.yaml")["spec"]?["selector"]?["matchExpressions"]?.items.first?["values"]?.items.compactMap(\.text) ?? []
        for name in ["pod.yaml", "daemonset.yaml", "tenants/daemonset.yaml"] {
            let manifest = try Self.load(name)
            let app = manifest["metadata"]?["labels"]?["app"]?.text ?? manifest["spec"]?["template"]?["metadata"]?["labels"]?["app"]?.text
            #expect(app.map(selected.contains) == true, "\(name)'s pods are scraped")
        }
    }
}

extension YAMLNode {
    subscript(key: String) -> YAMLNode? {
        guard case .mapping(let pairs) = self else { return nil }
        return pairs.first { $0.key.text == key }?.value
    }

    var items: [YAMLNode] {
        if case .sequence(let items) = self { return items }
        return []
    }

    var text: String? {
        if case .scalar(let scalar) = self { return scalar.text }
        return nil
    }
}
