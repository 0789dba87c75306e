import Testing
import WAFJSON
import WAFTestTraits

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

@Suite("JSON values", .offPool)
struct JSONValueTests {
    @Test("every kind of value parses to its case, nested to any shape")
    func parsesEveryKind() {
        let document = #"{"a": null, "b": true, "c": 1.5, "d": "x", "e": [1, "two", [false]], "f": {"g": {}}}"#
        let value = JSONValue.parse(Array(document.utf8))
        #expect(
            value
                == .object([
                    "a": .null, "b": .bool(true), "c": .number(1.5), "d": .string("x"),
                    "e": .array([.number(1), .string("two"), .array([.bool(false)])]), "f": .object(["g": .object([:])]),
                ]))
    }

    @Test("a number is never read as a boolean, nor a boolean as a number")
    func numbersAndBooleansStayApart() {
        #expect(JSONValue.parse(Array("1".utf8)) == .number(1))
        #expect(JSONValue.parse(Array("0".utf8)) == .number(0))
        #expect(JSONValue.parse(Array("false".utf8)) == .bool(false))
    }

    @Test("what is not one whole JSON document is nil, not an error thrown")
    func notJSON() {
        for text in ["", "{", "[1", "{'a': 1}", "nul", "1 2", "{\"a\": 1} x", "\u{1}"] {
            #expect(JSONValue.parse(Array(text.utf8)) == nil, "\(text.debugDescription)")
        }
    }

    @Test("a value encodes to JSON that parses back to the same value")
    func roundTrip() throws {
        let value = JSONValue.object(["token": .string("a\"b\\c\u{1}é"), "list": .array([.null, .bool(true), .number(-2.25)])])
        let encoded = Array(try JSONEncoder().encode(value))
        #expect(JSONValue.parse(encoded) == value)
    }

    @Test("subscripts, string and integer read what is there, and nil otherwise")
    func accessors() {
        let value = JSONValue.object(["n": .number(42), "f": .number(4.5), "s": .string("text"), "big": .number(1e15)])
        #expect(value["n"]?.integer == 42)
        #expect(value["f"]?.integer == nil, "a fraction is no integer")
        #expect(value["big"]?.integer == nil, "beyond what a Double holds exactly as an integer")
        #expect(JSONValue.number(-7).integer == -7)
        #expect(value["s"]?.string == "text" && value["n"]?.string == nil)
        #expect(value["missing"] == nil)
        #expect(JSONValue.array([.null])["n"] == nil, "an array has no keys")
    }

    @Test("each kind has a name for error messages")
    func kinds() {
        let kinds = [JSONValue.null, .bool(true), .number(1), .string(""), .array([]), .object([:])].map(\.kind)
        #expect(kinds == ["null", "a boolean", "a number", "a string", "an array", "an object"])
    }
}
