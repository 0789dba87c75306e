"""What each Swift module and C library costs in a binary: the sizes of its symbols (code and
data), by the module named in each Swift symbol's mangling, and C symbols by their library prefix.
Symbols are a part of the file (not headers, not unwinding tables, not the symbol table itself), so
the shares are what the table is for, and the total is printed beside the stripped file size.

    python3 scripts/module-sizes.py BINARY [TOP]
"""
import collections
import os
import re
import subprocess
import sys

binary, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20
listing = subprocess.run(["nm", "-S", "--size-sort", binary], capture_output=True, text=True, check=True).stdout
sizes = collections.Counter()
for line in listing.splitlines():
    parts = line.split()
    if len(parts) < 4:
        continue
    size, name = int(parts[1], 16), parts[3]
    swift = re.match(r"^\$s(\d+)(\w+)", name)
    if swift:
        module = swift.group(2)[: int(swift.group(1))]
    elif name.startswith(("$s", "symbolic", "associated conformance")):
        module = "Swift (standard library)"
    elif "NIOBoringSSL" in name:
        module = "CNIOBoringSSL (C, TLS for NIOSSL)"
    elif "CryptoBoringSSL" in name or re.match(r"^_ZN\d*(bssl|mldsa|mlkem|slhdsa)|^_ZL\d+(ecp_|kP|k[A-Z])|^Keccak", name):
        module = "BoringSSL (C, swift-crypto)"
    elif name.startswith(("__CF", "_CF")):
        module = "FoundationEssentials (C tables)"
    elif "dispatch" in name:
        module = "libdispatch (C)"
    elif name.startswith(("_swift", "swift_", "_ZN5swift")) or "swift" in name.lower():
        module = "Swift runtime (C++)"
    elif name.startswith("c_nio_"):
        module = "SwiftNIO (C)"
    else:
        module = "other C and C++"
    sizes[module] += size
total = sum(sizes.values())
for module, size in sizes.most_common(top):
    print(f"  {size / 1e6:6.2f} MB  {module}")
rest = total - sum(size for _, size in sizes.most_common(top))
print(f"  {rest / 1e6:6.2f} MB  {len(sizes) - top if len(sizes) > top else 0} more modules")
print(f"  {total / 1e6:6.2f} MB  all symbols of {os.path.basename(binary)}")
