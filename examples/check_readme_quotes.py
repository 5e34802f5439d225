"""Fails unless README.md quotes each example file whole, as one fenced code block, so
that the README shows exactly what CI builds and runs. Usage: check_readme_quotes.py README FILE..."""
import re
import sys

readme = open(sys.argv[1], encoding="utf-8").read()
blocks = re.findall(r"^```[a-z]*\n(.*?)^```$", readme, flags=re.S | re.M)
missing = [path for path in sys.argv[2:] if open(path, encoding="utf-8").read() not in blocks]
for path in missing:
    print(f"README.md has no code block equal to {path}")
sys.exit(1 if missing else 0)
