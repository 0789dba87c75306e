import CYAML

/// Parses YAML with libyaml (Debian's libyaml, the C library Yams wraps) into a `YAMLNode`, in
/// bounded time and memory: aliases are followed at most `maximumValues` times in all (a
/// "billion laughs" document is refused, not expanded) and nesting stops at `maximumDepth`.
enum YAMLDocument {
    struct ParseError: Error, Sendable, CustomStringConvertible {
        let description: String
    }

    static let maximumValues = 10_000
    static let maximumDepth = 32

    /// The document's root, or nil for an empty document.
    static func parse(_ bytes: [UInt8]) throws(ParseError) -> YAMLNode? {
        var parser = yaml_parser_t()
        guard yaml_parser_initialize(&parser) == 1 else { throw ParseError(description: "libyaml could not start") }
        defer { yaml_parser_delete(&parser) }
        var document = yaml_document_t()
        let loaded = bytes.withUnsafeBufferPointer { buffer in
            yaml_parser_set_input_string(&parser, buffer.baseAddress, buffer.count)
            return yaml_parser_load(&parser, &document)
        }
        guard loaded == 1 else { throw ParseError(description: problem(parser)) }
        defer { yaml_document_delete(&document) }
        guard let root = yaml_document_get_root_node(&document) else { return nil }
        var budget = Budget()
        let node = try build(root, in: &document, depth: 0, budget: &budget)
        // Only one document: a second one would be silently ignored otherwise.
        var next = yaml_document_t()
        guard yaml_parser_load(&parser, &next) == 1 else { throw ParseError(description: problem(parser)) }
        defer { yaml_document_delete(&next) }
        if yaml_document_get_root_node(&next) != nil { throw ParseError(description: "it holds more than one YAML document") }
        return node
    }

    private struct Budget {
        var values = 0
    }

    private static func build(
        _ node: UnsafeMutablePointer<yaml_node_t>, in document: inout yaml_document_t, depth: Int, budget: inout Budget
    ) throws(ParseError) -> YAMLNode {
        budget.values += 1
        guard budget.values <= maximumValues else {
            throw ParseError(description: "it holds more than \(maximumValues) values, counting each repetition an alias makes")
        }
        guard depth < maximumDepth else { throw ParseError(description: "it nests deeper than \(maximumDepth) levels") }
        let tag = node.pointee.tag.map { String(cString: $0) }
        switch node.pointee.type {
        case YAML_SCALAR_NODE:
            let scalar = node.pointee.data.scalar
            let text = String(decoding: UnsafeBufferPointer(start: scalar.value, count: scalar.length), as: UTF8.self)
            return .scalar(YAMLScalar(text: text, quoted: scalar.style != YAML_PLAIN_SCALAR_STYLE, tag: tag == "?" ? nil : tag))
        case YAML_SEQUENCE_NODE:
            var items: [YAMLNode] = []
            var item = node.pointee.data.sequence.items.start
            while let current = item, current != node.pointee.data.sequence.items.top {
                guard let child = yaml_document_get_node(&document, current.pointee) else { break }
                items.append(try build(child, in: &document, depth: depth + 1, budget: &budget))
                item = current + 1
            }
            return .sequence(items)
        case YAML_MAPPING_NODE:
            var pairs: [YAMLPair] = []
            var pair = node.pointee.data.mapping.pairs.start
            while let current = pair, current != node.pointee.data.mapping.pairs.top {
                guard let key = yaml_document_get_node(&document, current.pointee.key),
                    let value = yaml_document_get_node(&document, current.pointee.value)
                else { break }
                pairs.append(YAMLPair(
                    key: try build(key, in: &document, depth: depth + 1, budget: &budget),
                    value: try build(value, in: &document, depth: depth + 1, budget: &budget)))
                pair = current + 1
            }
            return .mapping(pairs)
        default:
            return .scalar(YAMLScalar(text: "", quoted: false, tag: nil))
        }
    }

    /// libyaml's problem as one sentence: what, and where.
    private static func problem(_ parser: yaml_parser_t) -> String {
        let what = parser.problem.map { String(cString: $0) } ?? "it is not valid YAML"
        let mark = parser.problem_mark
        return "it is not valid YAML: \(what) at line \(mark.line + 1), column \(mark.column + 1)"
    }
}
