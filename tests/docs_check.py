#!/usr/bin/env python3
"""docs_check.py - the documents against the tree: every file of src/ named
in docs/architecture.md's map, README.md short, no "free() it" (the library's
memory is freed with infer_free()), and no relative link to a missing file.

usage: docs_check.py SOURCE_DIR; prints one line per failure, exits 1 on any."""
import os
import re
import sys

README_LIMIT = 15000  # bytes: a newcomer reads it in five minutes


def documents(root):
    docs = os.path.join(root, "docs")
    names = sorted(f for f in os.listdir(docs) if f.endswith(".md")) if os.path.isdir(docs) else []
    return [os.path.join(root, "README.md")] + [os.path.join(docs, f) for f in names]


def missing_from_map(root):
    path = os.path.join(root, "docs", "architecture.md")
    if not os.path.exists(path):
        return ["docs/architecture.md is missing: it holds the map of src/"]
    text = open(path, encoding="utf-8").read()
    failures = []
    for name in sorted(os.listdir(os.path.join(root, "src"))):
        # the whole name, not a part of a longer one (jinja.c inside jinja_eval.c)
        if not re.search(r"(?:(?<![\w./-])|(?<=src/))" + re.escape(name) + r"(?![\w.-])", text):
            failures.append(f"docs/architecture.md: its map of src/ does not name src/{name}")
    # and no row of the map names a file src/ does not have
    section = re.search(r"^## The map of `src/`$(.*?)^## ", text, flags=re.S | re.M)
    have = set(os.listdir(os.path.join(root, "src")))
    for name in re.findall(r"^\| `([^`]+)` \|", section.group(1) if section else "", flags=re.M):
        if name not in have:
            failures.append(f"docs/architecture.md: its map of src/ names {name}, which src/ does not have")
    return failures


LINK = re.compile(r"\]\(([^)\s]+)\)")


def broken_links(path, root):
    failures = []
    text = open(path, encoding="utf-8").read()
    # links inside code are not links
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        file_part = target.split("#", 1)[0]
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
        if not os.path.exists(resolved):
            failures.append(f"{os.path.relpath(path, root)}: link to {target}: no such file")
    return failures


def main():
    if len(sys.argv) != 2:
        print("usage: docs_check.py SOURCE_DIR", file=sys.stderr)
        return 2
    root = sys.argv[1]
    failures = missing_from_map(root)
    readme = os.path.join(root, "README.md")
    size = os.path.getsize(readme)
    if size >= README_LIMIT:
        failures.append(f"README.md is {size} bytes: keep it under {README_LIMIT} (the rest goes to docs/)")
    for path in documents(root):
        text = open(path, encoding="utf-8").read()
        for n, line in enumerate(text.split("\n"), 1):
            if "free() it" in line:
                failures.append(f"{os.path.relpath(path, root)}:{n}: says \"free() it\": "
                                "the library's memory is freed with infer_free()")
        failures += broken_links(path, root)
    for f in failures:
        print("docs_check: " + f)
    if failures:
        return 1
    print(f"docs_check: {len(os.listdir(os.path.join(root, 'src')))} files of src/ mapped, "
          f"README.md {size} bytes, links of {len(documents(root))} documents resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
