#!/usr/bin/env python3
"""Fails when a module imports one it must not.

The rule is Package.swift: a target may import the targets and products it names as dependencies
(and the system's modules), nothing else, even where SwiftPM would let a module of a dependency's
dependency through. On top, the walls of the daemon's layering (docs/architecture.md), checked
against Package.swift's dependencies followed through: a wall cannot be crossed by a new
dependency either.

    scripts/check-imports.py            # prints each offending import with its file and line
    scripts/check-imports.py --graph    # the graph of our library modules, as docs/architecture.md shows it

It also fails when docs/architecture.md's graph (between its markers) is not the one Package.swift
makes: the page cannot fall behind the code.
"""
import json
import os
import re
import subprocess
import sys

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# Modules a product brings beside its own name.
PRODUCT_MODULES = {"Metrics": {"Metrics", "CoreMetrics"}}
# The toolchain's modules: any target may import them.
SYSTEM = {"Swift", "Glibc", "Musl", "Darwin", "Dispatch", "Foundation", "FoundationEssentials", "Synchronization", "_Concurrency",
          "Testing", "XCTest", "os"}
# Which of our modules may never reach which, directly or through others.
WALLS = {
    # The wire format and the transport are the bottom: nothing of ours below them.
    "WAFHTTPWire": "*",
    "WAFProxyLoop": "*",
    "WAFDaemonTransport": "*",
    # The socket API and the proxy are siblings: neither knows the other.
    "WAFSocketAPI": {"WAFTokenProxy", "WAFTokenDaemon", "WAFTokenStorage", "WAFDaemonConfiguration"},
    # The proxy takes its settings as values of its own, made by the composition root.
    "WAFTokenProxy": {"WAFSocketAPI", "WAFTokenDaemon", "WAFTokenStorage", "WAFDaemonConfiguration"},
    # Lower layers never reach the daemon that wires them.
    "WAFDaemonConfiguration": {"WAFTokenDaemon", "WAFSocketAPI", "WAFTokenProxy", "WAFTokenStorage", "WAFProviderRegistry", "WAFDaemonTransport"},
    "WAFProviderRegistry": {"WAFTokenDaemon", "WAFSocketAPI", "WAFTokenProxy", "WAFTokenStorage"},
    "WAFTokenStorage": {"WAFTokenDaemon", "WAFSocketAPI", "WAFTokenProxy", "WAFDaemonTransport"},
    "WAFTokenCore": "*",
    # A plug-in knows the contracts it implements, nothing else of ours.
    "WAFSystemd": {"WAFTokenDaemon", "WAFSocketAPI", "WAFTokenProxy", "WAFTokenStorage", "WAFProviderRegistry", "WAFDaemonConfiguration",
                   "WAFTokenCanary", "WAFDelivery", "WAFDaemonTransport", "WAFTokenCore"},
}

# The layers of our library modules, lowest first: a module depends only on modules of layers
# below its own, never on one of its own layer or above (docs/architecture.md, "Layers"). A new
# module is given its layer here, or the check fails.
LAYERS = [
    # Contracts and parts that need nothing of ours.
    {"WAFTokenCore", "WAFJSON", "WAFHTTPWire", "WAFVersion", "WAFDaemonTransport", "WAFDelivery", "WAFServiceManager",
     "WAFEventLoopExecutor", "WAFProxyLoop"},
    # What the features share: the solver, the configuration, the registry of running providers,
    # storage, the client.
    {"WAFChallenge", "WAFDaemonConfiguration", "WAFProviderRegistry", "WAFTokenStorage", "WAFDaemonClient", "WAFTokenCoreTestKit",
     "WAFProxyLoopTestKit"},
    # The features, none of which knows another.
    {"WAFSocketAPI", "WAFTokenProxy", "WAFTokenCanary", "WAFTokenServiceHTTP", "WAFLocalTokenService", "WAFTokenCtl"},
    # The composition root, the plug-ins that implement layer 1's contracts (WAFSystemd), and the
    # start's conformance warm-up (which names types of the layers below); the executables join them.
    {"WAFTokenDaemon", "WAFSystemd", "WAFStartupWarmup"},
]

package = json.loads(subprocess.run(["swift", "package", "dump-package"], capture_output=True, text=True, check=True).stdout)
targets = {t["name"]: t for t in package["targets"]}


def dependencies(target):
    names = set()
    for dependency in target["dependencies"]:
        for kind in ("byName", "target"):
            if kind in dependency:
                names.add(dependency[kind][0])
        if "product" in dependency:
            product = dependency["product"][0]
            names |= PRODUCT_MODULES.get(product, {product})
    return names


def ours(name):
    return name in targets


problems = []
# C targets of our own that only stand in for a Debian library (CLibrariesOnDemand loads libssl and libsystemd on
# first use): below every layer, like the system libraries they stand for.
C_SHIMS = {name for name, t in targets.items() if t["type"] == "regular" and name.startswith("C") and name[1:2].isupper()}
# The walls, through every path of Package.swift's dependencies.
for module, forbidden in WALLS.items():
    seen, stack = set(), [module]
    while stack:
        for name in dependencies(targets[stack.pop()]):
            if ours(name) and name not in seen:
                seen.add(name)
                stack.append(name)
    ours_reached = {name for name in seen if targets[name]["type"] == "regular"}
    crossed = ours_reached if forbidden == "*" else ours_reached & forbidden
    for name in sorted(crossed - {"CLibPSL", "CLinuxTimers"} - C_SHIMS):
        problems.append(f"Package.swift: {module} depends on {name} (directly or through another); docs/architecture.md says it must not")

TEST_SUPPORT = {"WAFTestSupport", "WAFTestTraits"}
# The layers: every library has one, and each of its dependencies is in a lower one.
layer_of = {name: index for index, layer in enumerate(LAYERS) for name in layer}
for name, target in sorted(targets.items()):
    if target["type"] != "regular" or name in TEST_SUPPORT or name in C_SHIMS:
        continue
    if name not in layer_of:
        problems.append(f"scripts/check-imports.py: {name} has no layer in LAYERS; give it one")
        continue
    for dependency in sorted(d for d in dependencies(target) if d in layer_of):
        if layer_of[dependency] >= layer_of[name]:
            where = "its own layer" if layer_of[dependency] == layer_of[name] else "a higher layer"
            problems.append(f"Package.swift: {name} (layer {layer_of[name] + 1}) depends on {dependency}, of {where}: dependencies point down")

# The key table is read by the configuration module and the composition root only: the daemon
# hands every other module its values (a proxy's settings, a listener's limits).
KEY_READERS = {"WAFDaemonConfiguration", "WAFTokenDaemon"}
KEY_READ = re.compile(r"\bKeys\.(?!self\b)[a-z]\w*")
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
for name, target in sorted(targets.items()):
    if target["type"] not in ("regular", "executable") or name in KEY_READERS:
        continue
    for root, _, files in os.walk(target.get("path") or "Sources/" + name):
        for file in sorted(f for f in files if f.endswith(".swift")):
            source = os.path.join(root, file)
            for number, line in enumerate(open(source, encoding="utf-8"), 1):
                if KEY_READ.search(STRING.sub('""', line).split("//")[0]):
                    problems.append(f"{source}:{number}: {name} reads the key table; only {', '.join(sorted(KEY_READERS))} may (pass it the value)")

# Every import of every source file against its target's declared dependencies.
IMPORT = re.compile(r"^\s*(?:@[\w()]+\s+)*import\s+(?:(?:struct|class|enum|protocol|func|var|let|typealias)\s+)?([A-Za-z_]\w*)")
for name, target in targets.items():
    if target["type"] == "system":
        continue
    path = target.get("path") or ("Tests/" if target["type"] == "test" else "Sources/") + name
    allowed = dependencies(target) | SYSTEM | {name}
    for root, _, files in os.walk(path):
        for file in sorted(files):
            if not file.endswith(".swift"):
                continue
            source = os.path.join(root, file)
            in_string = False  # a multi-line string literal (a script a test runs) imports nothing
            for number, line in enumerate(open(source, encoding="utf-8"), 1):
                if line.count('"""') % 2:
                    in_string = not in_string
                match = not in_string and IMPORT.match(line)
                if match and match.group(1) not in allowed:
                    problems.append(f"{source}:{number}: {name} imports {match.group(1)}, which Package.swift does not give it")

# Inside a module, its folders are layers too: a folder uses the types of folders below it, and no
# two folders use each other, directly or around a loop. A type belongs to the folder whose file
# declares it at the top level; a use is its name in code (comments and strings left out). The
# files at a module's root count as one folder, ".".
TOP_DECLARATION = re.compile(
    r"^(?:(?:public|package|internal|private|fileprivate|final|indirect)\s+)*(?:struct|class|enum|protocol|actor|typealias)\s+([A-Z]\w*)", re.M)
# Strings and comments, read in one pass from the left, so that a `//` inside a string ("https://")
# or a quote inside a comment is not taken for the other.
STRINGS_AND_COMMENTS = re.compile(r'#*"""[\s\S]*?"""#*|#*"(?:[^"\\\n]|\\.)*"#*|//[^\n]*|/\*[\s\S]*?\*/')


def code_only(text):
    return STRINGS_AND_COMMENTS.sub(lambda m: '""' if m.group(0).lstrip("#").startswith('"') else " ", text)


def folder_graph(module_path):
    code = {}
    for root, _, files in os.walk(module_path):
        for file in files:
            if file.endswith(".swift"):
                folder = os.path.relpath(root, module_path)
                code[folder] = code.get(folder, "") + "\n" + code_only(open(os.path.join(root, file), encoding="utf-8").read())
    home = {name: folder for folder, text in code.items() for name in TOP_DECLARATION.findall(text)}
    uses = {}
    for folder, text in code.items():
        for word in set(re.findall(r"\b[A-Z]\w*\b", text)):
            if home.get(word, folder) != folder:
                uses.setdefault(folder, {}).setdefault(home[word], []).append(word)
    return uses


def folder_loop(uses):
    """A loop of folders as a list (first == last), or None."""
    state = {}

    def visit(folder, path):
        state[folder] = "open"
        for used in sorted(uses.get(folder, {})):
            if state.get(used) == "open":
                return path[path.index(used):] + [used] if used in path else [folder, used]
            if used not in state:
                found = visit(used, path + [used])
                if found:
                    return found
        state[folder] = "done"
        return None

    for folder in sorted(uses):
        if folder not in state:
            found = visit(folder, [folder])
            if found:
                return found
    return None


for name, target in sorted(targets.items()):
    if target["type"] not in ("regular", "executable"):
        continue
    uses = folder_graph(target.get("path") or "Sources/" + name)
    loop = folder_loop(uses)
    if loop:
        steps = ", ".join(f"{a} uses {b} ({', '.join(sorted(set(uses[a][b]))[:3])})" for a, b in zip(loop, loop[1:]))
        problems.append(f"Sources/{name}: its folders form a loop: {steps}; move a type so that folders use only those below them")

# The graph of our library modules, lowest first, as the architecture page carries it.
BEGIN, END = "<!-- module graph: generated by scripts/check-imports.py --graph -->", "<!-- end of module graph -->"
libraries = {name for name, t in targets.items() if t["type"] == "regular" and not name.startswith(("WAFTest", "C"))}
edges = {name: sorted(d for d in dependencies(targets[name]) if d in libraries) for name in libraries}
level = {}
def depth(name):
    if name not in level:
        level[name] = 1 + max((depth(d) for d in edges[name]), default=0)
    return level[name]
rows = [BEGIN, "```"]
for layer in range(1, max(map(depth, libraries)) + 1):
    for name in sorted(n for n in libraries if depth(n) == layer):
        rows.append((f"{layer}  {name:<24}" + (" ─► " + ", ".join(edges[name]) if edges[name] else "")).rstrip())
rows += ["```", END]
graph = "\n".join(rows)
if "--graph" in sys.argv:
    print(graph)
    sys.exit(0)
page = open("docs/architecture.md", encoding="utf-8").read()
if BEGIN not in page or END not in page or page[page.index(BEGIN):page.index(END) + len(END)] != graph:
    problems.append("docs/architecture.md: its module graph is not Package.swift's; paste in the output of scripts/check-imports.py --graph")

for problem in problems:
    print(problem)
if problems:
    print(f"check-imports: {len(problems)} problem(s); see docs/architecture.md for which module may use which", file=sys.stderr)
    sys.exit(1)
print(f"check-imports: {sum(1 for t in targets.values() if t['type'] != 'system')} modules import only what Package.swift gives them")
