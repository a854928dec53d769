#!/usr/bin/env python3
"""The shape of kura's code, as issue 41 holds it: no source file over
600 lines and no function over 150, outside tests and generated tables.

Usage: .ci/shape.py [--max-file N] [--max-fn N] [--top K]
Exit 1 (and a list) when something is over; --top lists the largest anyway.

Counting: a file's lines are its lines minus those of `#[cfg(test)]`
modules in it; files under tests/, benches/, fuzz/ and named tests.rs are
tests. A function is counted from its `fn` line to its closing brace,
found by a small Rust tokenizer (strings, raw strings, chars, lifetimes
and comments skipped). Generated tables are files that say
`@generated` in their first lines.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FN_RE = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+\"[^\"]*\"\s+)?fn\s+(\w+)")
TEST_MOD_RE = re.compile(r"^\s*#\[cfg\((?:all\()?test")


def is_test_path(rel):
    parts = rel.split(os.sep)
    return ("tests" in parts or "benches" in parts or "fuzz" in parts
            or parts[-1] == "tests.rs" or parts[-1].endswith("_tests.rs")
            or "examples" in parts)


def code_mask(text):
    """For each char: True when it is code (not in a string/comment)."""
    n = len(text)
    mask = [True] * n
    i = 0
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                mask[k] = False
            i = j
        elif c == "/" and text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            for k in range(i, j):
                mask[k] = False
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 260]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            close = '"' + m.group(1)
            j = text.find(close, i + len(m.group(0)))
            j = n if j < 0 else j + len(close)
            for k in range(i, j):
                mask[k] = False
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            for k in range(i, min(j, n)):
                mask[k] = False
            i = j
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 12])
            if m:
                for k in range(i, i + len(m.group(0))):
                    mask[k] = False
                i += len(m.group(0))
            else:
                i += 1  # a lifetime
        else:
            i += 1
    return mask


def block_end(text, mask, start):
    """Index of the brace closing the first `{` at or after start, or None
    when a `;` comes first (a declaration without a body)."""
    depth = 0
    for i in range(start, len(text)):
        if not mask[i]:
            continue
        c = text[i]
        if c == ";" and depth == 0:
            return None
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
    return None


def scan(path):
    text = open(path, encoding="utf-8").read()
    mask = code_mask(text)
    line_starts = [0]
    for i, c in enumerate(text):
        if c == "\n":
            line_starts.append(i + 1)
    lines = text.split("\n")
    lineno = lambda off: __import__("bisect").bisect_right(line_starts, off)
    test_lines = 0
    fns = []
    skip_until = -1
    for idx, line in enumerate(lines):
        off = line_starts[idx]
        if off < skip_until:
            continue
        if TEST_MOD_RE.match(line):
            nxt = "\n".join(lines[idx:idx + 3])
            if re.search(r"\bmod\s+\w+\s*\{", nxt):
                end = block_end(text, mask, off)
                if end is not None:
                    test_lines += lineno(end) - idx
                    skip_until = end
                    continue
        m = FN_RE.match(line)
        if m and mask[off + line.index("fn")]:
            end = block_end(text, mask, off)
            if end is not None:
                fns.append((lineno(end) - idx, m.group(1), idx + 1))
    total = len(lines) - (1 if text.endswith("\n") else 0)
    return total - test_lines, fns, "@generated" in "\n".join(lines[:5])


def main():
    args = sys.argv[1:]
    max_file, max_fn, top = 600, 150, 0
    while args:
        a = args.pop(0)
        if a == "--max-file":
            max_file = int(args.pop(0))
        elif a == "--max-fn":
            max_fn = int(args.pop(0))
        elif a == "--top":
            top = int(args.pop(0))
        else:
            sys.exit(__doc__)
    files, fns = [], []
    for base in ("crates",):
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, base)):
            dirnames[:] = [d for d in dirnames if d != "target"]
            for f in filenames:
                if not f.endswith(".rs"):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, ROOT)
                if is_test_path(rel):
                    continue
                n, fs, generated = scan(path)
                if generated:
                    continue
                files.append((n, rel))
                fns.extend((length, f"{rel}:{line} {name}") for length, name, line in fs)
    files.sort(reverse=True)
    fns.sort(reverse=True)
    over_files = [f for f in files if f[0] > max_file]
    over_fns = [f for f in fns if f[0] > max_fn]
    for n, rel in over_files:
        print(f"file over {max_file} lines: {rel} ({n})")
    for n, where in over_fns:
        print(f"function over {max_fn} lines: {where} ({n})")
    if top:
        print(f"largest files: " + ", ".join(f"{r} {n}" for n, r in files[:top]))
        print(f"longest functions: " + ", ".join(f"{w} {n}" for n, w in fns[:top]))
    if over_files or over_fns:
        sys.exit(1)
    print(f"shape: {len(files)} files (largest {files[0][0]} lines), "
          f"{len(fns)} functions (longest {fns[0][0]} lines)")


if __name__ == "__main__":
    main()
