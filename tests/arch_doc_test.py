#!/usr/bin/env python3
"""docs/architecture.md's layer table against CMakeLists.txt: every layer
library has a row, its "links" column is the target's PUBLIC links (— for
none) and its "sources" column the folders its sources are in.
And the include rule the link check cannot see: no header or source of a
layer (include/snapdiff/LAYER/**, src/LAYER/**) includes a higher layer's
headers, public ("snapdiff/LAYER/...") or private ("LAYER/...").
Usage: arch_doc_test.py SOURCE_DIR"""
import os
import re
import sys

src = sys.argv[1]
cmake = open(f"{src}/CMakeLists.txt", encoding="utf-8").read()
doc = open(f"{src}/docs/architecture.md", encoding="utf-8").read()

rows = {}
for line in doc.splitlines():
    m = re.match(r"\| `(snapdiff_\w+)` \| ([^|]+) \| ([^|]+) \|", line)
    if m:
        rows[m.group(1)] = (m.group(2).strip(), m.group(3).strip())

fails = []
layers = re.findall(r"add_library\((snapdiff_(?:util|model|input|analysis|report)) STATIC\b", cmake)
util_sources = re.search(r"set\(SNAPDIFF_UTIL_SOURCES\n(.*?)\)", cmake, re.S)
if len(set(layers)) < 5:
    fails.append(f"CMakeLists.txt: expected five layer libraries, found {sorted(set(layers))}")
for lib in sorted(set(layers)):
    if lib not in rows:
        fails.append(f"docs/architecture.md: no row for `{lib}`")
        continue
    if lib == "snapdiff_util":
        body = util_sources.group(1) if util_sources else ""
    else:
        body = re.search(rf"add_library\({lib} STATIC\n(.*?)\)", cmake, re.S).group(1)
    folders = sorted({"src/" + f.split("/")[1] + "/" for f in re.findall(r"src/\w+/[\w.]+", body)})
    links = re.search(rf"target_link_libraries\({lib}\s+PUBLIC ([\w ]+?)\s*\n", cmake)
    public = links.group(1).split() if links else []
    want_links = ", ".join(f"`{t}`" for t in public) if public else "—"
    got_links, got_sources = rows[lib]
    if got_links != want_links:
        fails.append(f"`{lib}`: the table says it links {got_links!r}, CMakeLists.txt {want_links!r}")
    want_sources = ", ".join(f"`{f}`" for f in folders)
    if got_sources != want_sources:
        fails.append(f"`{lib}`: the table says its sources are {got_sources!r}, CMakeLists.txt {want_sources!r}")

# Which layers' headers each layer may include (docs/architecture.md, "Layers"):
# util <- model <- input <- analysis <- report <- cli, each its own and those
# below; the view (include/snapdiff/view/: the report layer's input) sits
# between analysis and report and includes only the model. snapdiff/error.hpp
# is shared by all.
ORDER = ["util", "model", "input", "analysis", "report", "cli"]
MAY_INCLUDE = {layer: set(ORDER[: i + 1]) for i, layer in enumerate(ORDER)}
for layer in ("analysis", "report", "cli"):
    MAY_INCLUDE[layer].add("view")
MAY_INCLUDE["view"] = {"model", "view"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def included_layer(path):
    """The layer whose header `path` (an #include "...") names, "shared" for
    snapdiff/error.hpp, None for a file beside the includer."""
    parts = path.split("/")
    if parts[0] == "snapdiff":
        if parts[1:] == ["error.hpp"]:
            return "shared"
        return parts[1] if len(parts) > 2 else "unknown"
    return parts[0] if len(parts) > 1 and parts[0] in MAY_INCLUDE else None


includes_checked = 0
for root in (f"{src}/include/snapdiff", f"{src}/src"):
    for folder, _, files in os.walk(root):
        for name in sorted(files):
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            # A file of include/snapdiff/ itself (error.hpp) is shared: it includes no layer.
            layer = rel.split("/")[0] if "/" in rel else "shared"
            if not name.endswith((".hpp", ".h", ".cpp", ".cc", ".inc")):
                continue
            text = open(path, encoding="utf-8", errors="replace").read()
            for inc in INCLUDE.findall(text):
                target = included_layer(inc)
                if target is None:
                    continue
                includes_checked += 1
                if target == "shared":
                    continue
                allowed = MAY_INCLUDE.get(layer, set())
                if target not in allowed:
                    shown = os.path.relpath(path, src)
                    fails.append(f'{shown}: includes "{inc}" ({target}), above its layer ({layer})'
                                 if target in MAY_INCLUDE else
                                 f'{shown}: includes "{inc}", which is in no layer')
if includes_checked < 100:
    fails.append(f"only {includes_checked} includes of snapdiff headers found under include/ and src/")

for f in fails:
    print("FAIL", f)
print(f"{len(set(layers))} layer rows and {includes_checked} includes checked, {len(fails)} failures")
sys.exit(1 if fails else 0)
