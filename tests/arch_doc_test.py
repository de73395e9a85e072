#!/usr/bin/env python3
"""docs/architecture.md's layer table against CMakeLists.txt: every layer
library has a row, its "links" column is the target's PUBLIC links (— for
none) and its "sources" column the folders its sources are in.
Usage: arch_doc_test.py SOURCE_DIR"""
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
for f in fails:
    print("FAIL", f)
print(f"{len(set(layers))} layer rows checked, {len(fails)} failures")
sys.exit(1 if fails else 0)
