"""Runs one of the README's Python examples as a test: exits 77 (ctest: skipped) when a
module it imports is not installed, else as the example does.
Usage: run_python_example.py EXAMPLE MODULE..."""
import importlib.util
import runpy
import sys

example, modules = sys.argv[1], sys.argv[2:]
missing = [m for m in modules if importlib.util.find_spec(m) is None]
if missing:
    print(f"SKIPPED: {example} needs {', '.join(missing)}")
    sys.exit(77)
runpy.run_path(example, run_name="__main__")
