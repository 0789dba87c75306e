import CYAML

/// Parses YAML with libyaml (Debian's libyaml, the C library Yams wraps) into a `YAMLNode`, in
/// bounded time and memory, event by event: nesting stops at `maximumDepth` the moment it is
/// reached, and aliases are followed at most `maximumValues` times in all (a "billion laughs"
/// document is refused, not expanded). Loading a whole document first and checking afterwards let
/// a 50 KB file of unclosed `[` keep libyaml busy for 12.6 s before any limit was looked at.
enum YAMLDocument {
    struct ParseError: Error, Sendable, CustomStringConvertible {
        let description: String
    }

    static let maximumValues = 10_000
    static let maximumDepth = 32

    /// A collection being read: its items so far, the anchor it will be known by, its size in values.
    private enum Open {
        case sequence(items: [YAMLNode], anchor: String?, size: Int)
        case mapping(pairs: [YAMLPair], key: YAMLNode?, anchor: String?, size: Int)
    }

    /// The document's root, or nil for an empty document.
    static func parse(_ bytes: [UInt8]) throws(ParseError) -> YAMLNode? {
        // What libyaml makes of no bytes, without loading it (`--config /dev/null`).
        if bytes.isEmpty { return nil }
        var parser = yaml_parser_t()
        guard yaml_parser_initialize(&parser) == 1 else { throw ParseError(description: "libyaml could not start") }
        defer { yaml_parser_delete(&parser) }
        return try bytes.withUnsafeBufferPointer { (buffer) throws(ParseError) -> YAMLNode? in
            yaml_parser_set_input_string(&parser, buffer.baseAddress, buffer.count)
            var reader = Reader()
            while true {
                var event = yaml_event_t()
                guard yaml_parser_parse(&parser, &event) == 1 else { throw ParseError(description: problem(parser)) }
                defer { yaml_event_delete(&event) }
                if event.type == YAML_STREAM_END_EVENT { return reader.root }
                try reader.take(&event)
            }
        }
    }

    /// Builds nodes from events, checking the limits at each one.
    private struct Reader {
        var open: [Open] = []
        var anchors: [String: (node: YAMLNode, size: Int)] = [:]
        var values = 0
        var documents = 0
        var root: YAMLNode?

        mutating func take(_ event: inout yaml_event_t) throws(ParseError) {
            switch event.type {
            case YAML_DOCUMENT_START_EVENT:
                documents += 1
            case YAML_SCALAR_EVENT:
                let scalar = event.data.scalar
                let text = String(decoding: UnsafeBufferPointer(start: scalar.value, count: scalar.length), as: UTF8.self)
                let tag = scalar.tag.map { String(cString: $0) }
                let node = YAMLNode.scalar(YAMLScalar(text: text, quoted: scalar.style != YAML_PLAIN_SCALAR_STYLE, tag: tag))
                try begin()
                try finish(node, size: 1, anchor: scalar.anchor.map { String(cString: $0) })
            case YAML_SEQUENCE_START_EVENT:
                try begin()
                open.append(.sequence(items: [], anchor: event.data.sequence_start.anchor.map { String(cString: $0) }, size: 1))
            case YAML_MAPPING_START_EVENT:
                try begin()
                open.append(.mapping(pairs: [], key: nil, anchor: event.data.mapping_start.anchor.map { String(cString: $0) }, size: 1))
            case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                switch open.popLast() {
                case .sequence(let items, let anchor, let size)?: try finish(.sequence(items), size: size, anchor: anchor)
                case .mapping(let pairs, _, let anchor, let size)?: try finish(.mapping(pairs), size: size, anchor: anchor)
                case nil: break
                }
            case YAML_ALIAS_EVENT:
                let name = event.data.alias.anchor.map { String(cString: $0) } ?? ""
                // libyaml refuses an alias to an unknown anchor itself; this is belt and braces.
                guard let (node, size) = anchors[name] else { throw ParseError(description: "it refers to an unknown anchor") }
                try count(size)
                try finish(node, size: size, anchor: nil)
            default:
                break
            }
        }

        /// A new node starts at the current depth: within the limits, in the first document only.
        private mutating func begin() throws(ParseError) {
            // Only one document: a second one would be silently ignored otherwise.
            guard documents <= 1 else { throw ParseError(description: "it holds more than one YAML document") }
            guard open.count < maximumDepth else { throw ParseError(description: "it nests deeper than \(maximumDepth) levels") }
            try count(1)
        }

        private mutating func count(_ more: Int) throws(ParseError) {
            values += more
            guard values <= maximumValues else {
                throw ParseError(description: "it holds more than \(maximumValues) values, counting each repetition an alias makes")
            }
        }

        /// `node` is complete: it goes into the collection around it, or is the root.
        private mutating func finish(_ node: YAMLNode, size: Int, anchor: String?) throws(ParseError) {
            if let anchor { anchors[anchor] = (node, size) }
            switch open.popLast() {
            case .sequence(var items, let name, let total)?:
                items.append(node)
                open.append(.sequence(items: items, anchor: name, size: total + size))
            case .mapping(var pairs, let key?, let name, let total)?:
                pairs.append(YAMLPair(key: key, value: node))
                open.append(.mapping(pairs: pairs, key: nil, anchor: name, size: total + size))
            case .mapping(let pairs, nil, let name, let total)?:
                open.append(.mapping(pairs: pairs, key: node, anchor: name, size: total + size))
            case nil:
                root = node
            }
        }
    }

    /// libyaml's problem as one sentence: what, and where.
    private static func problem(_ parser: yaml_parser_t) -> String {
        let what = parser.problem.map { String(cString: $0) } ?? "it is not valid YAML"
        let mark = parser.problem_mark
        return "it is not valid YAML: \(what) at line \(mark.line + 1), column \(mark.column + 1)"
    }
}
