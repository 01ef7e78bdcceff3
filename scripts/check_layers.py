#!/usr/bin/env python3
"""Fails when a file includes a header of a layer above its own (src/layers.txt).

  check_layers.py [SRC]     check SRC (default: the src/ beside this script)
  check_layers.py --self-test
                            show the check fails on an upward include (and passes without)

Prints one line per upward include: file:line: <layer> includes "<header>" (layer <other>).
"""
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'\s*#\s*include\s+"([A-Za-z0-9_]+)/')


def read_layers(src):
    """{folder: rank}; folders on one line share a rank."""
    rank = {}
    with open(os.path.join(src, "layers.txt")) as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if line:
                r = len(set(rank.values()))
                for folder in line:
                    rank[folder] = r
    return rank


def violations(src):
    rank = read_layers(src)
    found = []
    for root, _, files in os.walk(src):
        rel = os.path.relpath(root, src)
        if rel == ".":
            continue
        layer = rel.split(os.sep)[0]
        if layer not in rank:
            found.append(f"{rel}: folder '{layer}' is not in layers.txt")
            continue
        for name in sorted(files):
            path = os.path.join(root, name)
            with open(path, errors="replace") as f:
                for n, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m or m.group(1) not in rank or m.group(1) == layer:
                        continue
                    other = m.group(1)
                    if rank[other] >= rank[layer]:
                        header = line.split('"')[1]
                        found.append(f"{os.path.relpath(path, src)}:{n}: {layer} includes \"{header}\" "
                                     f"(layer {other}, {'the same level' if rank[other] == rank[layer] else 'above'})")
    return found


def self_test():
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "layers.txt"), "w") as f:
            f.write("core\nengine\nserver train\n")
        for folder, text in {"core": '#include "core/b.h"\n', "engine": '#include "core/a.h"\n',
                             "server": '#include "engine/a.h"\n'}.items():
            os.makedirs(os.path.join(d, folder))
            with open(os.path.join(d, folder, "a.h"), "w") as f:
                f.write(text)
        assert violations(d) == [], violations(d)
        with open(os.path.join(d, "core", "a.h"), "a") as f:
            f.write('#include "engine/a.h"\n')
        with open(os.path.join(d, "server", "b.cpp"), "w") as f:
            f.write('#include "train/x.h"\n')
        found = violations(d)
        assert any(v.startswith("core/a.h:2: core includes \"engine/a.h\"") for v in found), found
        assert any(v.startswith("server/b.cpp:1: server includes \"train/x.h\"") for v in found), found
        assert len(found) == 2, found
    print("check_layers self-test: an upward include and a same-level include are both reported")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    src = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    found = violations(src)
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} include(s) against the layer order in {os.path.join(src, 'layers.txt')}", file=sys.stderr)
        return 1
    print(f"layers: no upward includes ({src})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
