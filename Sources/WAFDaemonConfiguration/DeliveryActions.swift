import WAFDelivery

/// `sinks.onToken` read from YAML, in the file or as a variable's or option's text (the same YAML
/// in flow style: `[{reload: app.service}]`), and written back so that `--check-config` reads the
/// same (docs/delivery.md).
enum DeliveryActions {
    static func check(_ given: SettingCheck.Given) -> Result<SettingCheck.Checked, SettingCheck.Problem> {
        let node: YAMLNode
        switch given {
        case .yaml(let yaml):
            node = yaml
        case .text(let text):
            guard !text.trimmingWhitespace.isEmpty else { return .success(.unset) }
            do {
                guard let parsed = try YAMLDocument.parse(Array(text.utf8)) else { return .success(.unset) }
                node = parsed
            } catch {
                return .failure(SettingCheck.Problem("is not YAML: \(error)"))
            }
        }
        if node.isNull { return .success(.unset) }
        guard case .sequence(let items) = node else { return .failure(SettingCheck.Problem("is \(node.kind), not a list of actions")) }
        var actions: [DeliveryAction] = []
        for (index, item) in items.enumerated() {
            switch action(item) {
            case .success(let action):
                if let problem = action.problem { return .failure(SettingCheck.Problem("item \(index + 1): \(problem)")) }
                actions.append(action)
            case .failure(let problem):
                return .failure(SettingCheck.Problem("item \(index + 1) \(problem.text)"))
            }
        }
        return .success(.daemon(.actions(actions)))
    }

    private static func action(_ item: YAMLNode) -> Result<DeliveryAction, SettingCheck.Problem> {
        guard case .mapping(let pairs) = item, pairs.count == 1, let pair = pairs.first, case .scalar(let key) = pair.key else {
            return .failure(SettingCheck.Problem("is not one of {signal: …}, {reload: …}, {run: […]}"))
        }
        switch key.text {
        case "signal":
            guard case .mapping(let fields) = pair.value else {
                return .failure(SettingCheck.Problem("signal is \(pair.value.kind), not {pidFile: PATH, name: HUP}"))
            }
            var pidFile: String?
            var name = "HUP"
            for field in fields {
                guard case .scalar(let fieldKey) = field.key, case .scalar(let value) = field.value else {
                    return .failure(SettingCheck.Problem("signal holds something other than pidFile and name"))
                }
                switch fieldKey.text {
                case "pidFile": pidFile = value.text
                case "name": name = value.text.hasPrefix("SIG") ? String(value.text.dropFirst(3)) : value.text
                default: return .failure(SettingCheck.Problem("signal has no field \(fieldKey.text.debugDescription) (pidFile, name)"))
                }
            }
            guard let pidFile else { return .failure(SettingCheck.Problem("signal needs a pidFile")) }
            return .success(.signal(pidFile: pidFile, signal: name))
        case "reload":
            guard case .scalar(let unit) = pair.value, unit.type == .string else {
                return .failure(SettingCheck.Problem("reload is \(pair.value.kind), not a unit name"))
            }
            return .success(.reload(unit: unit.text))
        case "run":
            switch pair.value {
            case .scalar(let program) where program.type == .string:
                return .success(.run([program.text]))
            case .sequence(let words):
                var argv: [String] = []
                for word in words {
                    guard case .scalar(let scalar) = word, scalar.type != .null else {
                        return .failure(SettingCheck.Problem("run holds \(word.kind), not a word of a command"))
                    }
                    argv.append(scalar.text)
                }
                return .success(.run(argv))
            default:
                return .failure(SettingCheck.Problem("run is \(pair.value.kind), not [PROGRAM, ARGS...]"))
            }
        default:
            return .failure(SettingCheck.Problem("is \(key.text.debugDescription), not signal, reload or run"))
        }
    }

    /// The actions as flow-style YAML that reads back the same.
    static func render(_ actions: [DeliveryAction]) -> String {
        let items = actions.map { action -> String in
            let yaml = DaemonConfiguration.yamlString
            switch action {
            case .signal(let pidFile, let signal): return "{signal: {pidFile: \(yaml(pidFile)), name: \(yaml(signal))}}"
            case .reload(let unit): return "{reload: \(yaml(unit))}"
            case .run(let argv): return "{run: [" + argv.map(yaml).joined(separator: ", ") + "]}"
            }
        }
        return "[" + items.joined(separator: ", ") + "]"
    }
}
