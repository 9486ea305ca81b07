#!/usr/bin/env python3
"""The shape of the workspace's code, per crate: lines of code (its `src/`,
without test modules), the largest file and the largest function.

    scripts/code-shape.py            # a table
    scripts/code-shape.py --json     # one JSON document

Lines are counted as they stand (comments and blank lines included), a
file's test module (`#[cfg(test)] mod ...` to the end of the file) left
out; `tests/`, `benches/` and `examples/` are not `src/`. A function is a
line starting (after indentation and qualifiers) with `fn`, to the line
that closes its brace at the same indentation.
"""
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FN = re.compile(r"^(\s*)(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+\"C\"\s+)?fn\s+(\w+)")


def code_lines(path):
    """The file's lines up to its test module."""
    lines = open(path, encoding="utf-8").read().split("\n")
    for i, line in enumerate(lines):
        t = line.strip()
        if t.startswith("#[cfg(") and "test" in t and i + 1 < len(lines):
            if lines[i + 1].strip().startswith("mod "):
                return lines[:i]
    return lines


def functions(lines):
    """(name, length in lines) of each function in `lines`."""
    out = []
    for i, line in enumerate(lines):
        m = FN.match(line)
        if not m:
            continue
        indent = m.group(1)
        # A declaration without a body (a trait's) ends with `;`.
        j = i
        while j < len(lines) and "{" not in lines[j] and not lines[j].rstrip().endswith(";"):
            j += 1
        if j >= len(lines) or lines[j].rstrip().endswith(";") and "{" not in lines[j]:
            continue
        if lines[j].rstrip().endswith("}") and lines[j].count("{") == lines[j].count("}"):
            out.append((m.group(8), j - i + 1))
            continue
        end = j + 1
        while end < len(lines) and lines[end] != indent + "}":
            end += 1
        out.append((m.group(8), end - i + 1))
    return out


def crate_shape(crate_dir):
    src = os.path.join(crate_dir, "src")
    total, files, fns = 0, [], []
    for dirpath, _, names in os.walk(src):
        for name in names:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(dirpath, name)
            lines = code_lines(path)
            rel = os.path.relpath(path, ROOT)
            total += len(lines)
            files.append((rel, len(lines)))
            fns += [(rel, f, n) for f, n in functions(lines)]
    files.sort(key=lambda f: -f[1])
    fns.sort(key=lambda f: -f[2])
    return {
        "crate": os.path.basename(crate_dir),
        "lines": total,
        "files": len(files),
        "largest_file": files[0][0] if files else None,
        "largest_file_lines": files[0][1] if files else 0,
        "largest_function": f"{fns[0][0]}: {fns[0][1]}" if fns else None,
        "largest_function_lines": fns[0][2] if fns else 0,
    }


def main():
    crates_dir = os.path.join(ROOT, "crates")
    rows = [crate_shape(os.path.join(crates_dir, c)) for c in sorted(os.listdir(crates_dir))
            if os.path.isdir(os.path.join(crates_dir, c, "src"))]
    if "--json" in sys.argv[1:]:
        print(json.dumps({"crates": rows}, indent=1))
        return
    print(f"{'crate':<24} {'lines':>6} {'files':>5}  largest file (lines); largest function (lines)")
    for r in rows:
        print(f"{r['crate']:<24} {r['lines']:>6} {r['files']:>5}  "
              f"{r['largest_file']} ({r['largest_file_lines']}); "
              f"{r['largest_function']} ({r['largest_function_lines']})")


if __name__ == "__main__":
    main()
