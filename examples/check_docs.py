"""Checks that the docs say what the tree holds. Fails unless:
- README.md quotes each README example file whole, as one fenced code block (what CI runs);
- every relative link in README.md and docs/*.md names an existing file;
- bench/results/README.md names every file under bench/results/, and names only those.
Usage: check_docs.py REPOSITORY_ROOT EXAMPLE..."""
import os
import re
import sys

root, examples = sys.argv[1], sys.argv[2:]
failures = []


def read(path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


readme = read("README.md")
blocks = re.findall(r"^```[a-z]*\n(.*?)^```$", readme, flags=re.S | re.M)
for path in examples:
    if read(path) not in blocks:
        failures.append(f"README.md has no code block equal to {path}")

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
