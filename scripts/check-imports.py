#!/usr/bin/env python3
"""Fails when a module imports one it must not.

The rule is Package.swift: a target may import the targets and products it names as dependencies
(and the system's modules), nothing else, even where SwiftPM would let a module of a dependency's
dependency through. On top, the walls of the daemon's layering (docs/architecture.md), checked
against Package.swift's dependencies followed through: a wall cannot be crossed by a new
dependency either.

    scripts/check-imports.py            # prints each offending import with its file and line
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
    "WAFDaemonTransport": "*",
    # The socket API and the proxy are siblings: neither knows the other.
    "WAFSocketAPI": {"WAFTokenProxy", "WAFTokenDaemon", "WAFTokenStorage", "WAFDaemonConfiguration"},
    "WAFTokenProxy": {"WAFSocketAPI", "WAFTokenDaemon", "WAFTokenStorage"},
    # Lower layers never reach the daemon that wires them.
    "WAFDaemonConfiguration": {"WAFTokenDaemon", "WAFSocketAPI", "WAFTokenProxy", "WAFTokenStorage", "WAFProviderRegistry", "WAFDaemonTransport"},
    "WAFProviderRegistry": {"WAFTokenDaemon", "WAFSocketAPI", "WAFTokenProxy", "WAFTokenStorage"},
    "WAFTokenStorage": {"WAFTokenDaemon", "WAFSocketAPI", "WAFTokenProxy", "WAFDaemonTransport"},
    "WAFTokenCore": "*",
}

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
    for name in sorted(crossed - {"CLibPSL", "CLinuxTimers"}):
        problems.append(f"Package.swift: {module} depends on {name} (directly or through another); docs/architecture.md says it must not")

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

for problem in problems:
    print(problem)
if problems:
    print(f"check-imports: {len(problems)} problem(s); see docs/architecture.md for which module may use which", file=sys.stderr)
    sys.exit(1)
print(f"check-imports: {sum(1 for t in targets.values() if t['type'] != 'system')} modules import only what Package.swift gives them")
