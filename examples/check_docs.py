"""Checks that the docs say what the tree holds. Fails unless:
- README.md quotes each README example file whole, as one fenced code block (what CI runs);
- README.md has at most README_LINES lines, and a glossary line for each term of JARGON it uses;
- every relative link in README.md and docs/*.md names an existing file;
- bench/results/README.md names every file under bench/results/, and names only those.
Usage: check_docs.py REPOSITORY_ROOT EXAMPLE..."""
import os
import re
import sys

root, examples = sys.argv[1], sys.argv[2:]
failures = []
README_LINES = 150  # a user's guide; design reasoning goes to docs/
# Terms a new user would have to look up; README.md's "## Glossary" defines each it uses in
# bold: "- **term, ...**: ...".
JARGON = ["amax", "axiswise", "tensorwise", "MXFP8", "E8M0", "RCEIL", "e4m3fn", "e5m2", "TE", "torchao", "gpt-fast",
          "GEMV", "split-K", "int8 planes", "cuBLAS", "dequantize", "do_bench", "dirty L2", "ceiling",
          "fake implementation", "stable ABI", "reduce-overhead", "libFuzzer"]


def read(path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


readme = read("README.md")
blocks = re.findall(r"^```[a-z]*\n(.*?)^```$", readme, flags=re.S | re.M)
for path in examples:
    if read(path) not in blocks:
        failures.append(f"README.md has no code block equal to {path}")

lines = readme.count("\n")
if lines > README_LINES:
    failures.append(f"README.md has {lines} lines, more than {README_LINES}")
glossary = readme.partition("\n## Glossary\n")[2].partition("\n## ")[0]
defined = " ".join(re.findall(r"\*\*(.+?)\*\*", glossary))
body = readme.replace(glossary, "")
for term in JARGON:
    if re.search(rf"(?<![\w-]){re.escape(term)}(?![\w-])", body) and not re.search(
            rf"(?<![\w-]){re.escape(term)}(?![\w-])", defined):
        failures.append(f"README.md uses {term!r} but its glossary does not define it")

# Inline links "](target)" and reference definitions "[name]: target".
link = re.compile(r"\]\(([^)\s]+)\)|^\[[^\]]+\]:\s*(\S+)", re.M)
docs = ["README.md", "bench/results/README.md"] + [os.path.join("docs", f) for f in sorted(os.listdir(os.path.join(root, "docs")))]
for doc in docs:
    for inline, reference in link.findall(read(doc)):
        target = (inline or reference).split("#")[0]
        if target and "://" not in target and not os.path.exists(os.path.join(root, os.path.dirname(doc), target)):
            failures.append(f"{doc} links to {target}, which does not exist")

index = read("bench/results/README.md")
named = set(re.findall(r"\]\(([^)\s/]+)\)", index))
kept = set(os.listdir(os.path.join(root, "bench/results"))) - {"README.md"}
failures += [f"bench/results/README.md does not name {f}" for f in sorted(kept - named)]
failures += [f"bench/results/README.md names {f}, which is not there" for f in sorted(named - kept)]

print("\n".join(failures) or "ok")
sys.exit(1 if failures else 0)
