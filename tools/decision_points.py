#!/usr/bin/env python3
"""Decision points (if, case, ?:, &&, ||) per function of C++ sources, as issue 48 counts them.

  decision_points.py FILE...           each function's count, the largest first
  decision_points.py --max N FILE...   also exit 1, naming them, if a generate() or a schedule
                                       function (its name starts with generate or schedule) has
                                       more than N

A function is a brace block whose header (the text since the previous ;, { or }) ends in a
parameter list, optionally const/override/noexcept; lambdas inside count toward it. Comments,
string and character literals are skipped first.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

LITERALS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
DECISIONS = re.compile(r"\bif\b|\bcase\b|\?|&&|\|\|")
# A header that opens a function body: name(parameters) [const] [override] [noexcept] [-> T].
HEADER = re.compile(r"([A-Za-z_~][\w:]*)\s*\((?:[^()]|\([^()]*\))*\)\s*(?:const\s*)?(?:override\s*)?"
                    r"(?:noexcept\s*)?(?:->\s*[\w:<>, ]+)?\s*$")
NOT_FUNCTIONS = {"if", "for", "while", "switch", "catch", "return", "sizeof"}


@dataclass
class Function:
    file: str
    line: int
    name: str
    decisions: int


def blank(m: re.Match[str]) -> str:
    """A literal or comment as spaces (newlines kept, so lines still count)."""
    return re.sub(r"[^\n]", " ", m.group(0))


def functions(path: Path) -> list[Function]:
    code = LITERALS.sub(blank, path.read_text())
    out: list[Function] = []
    stack: list[tuple[str | None, int, int]] = []  # (function name or None, start offset, line)
    last = 0  # end of the previous ;, { or }
    for i, ch in enumerate(code):
        if ch == "{":
            inside = any(name for name, _, _ in stack)
            m = HEADER.search(code[last:i])
            name = m.group(1) if m and not inside and m.group(1) not in NOT_FUNCTIONS else None
            stack.append((name, i, code.count("\n", 0, i) + 1))
            last = i + 1
        elif ch == "}":
            name, start, line = stack.pop() if stack else (None, 0, 0)
            if name:
                out.append(Function(str(path), line, name, len(DECISIONS.findall(code[start:i]))))
            last = i + 1
        elif ch == ";":
            last = i + 1
    return out


def bounded(f: Function) -> bool:
    short = f.name.split("::")[-1]
    return short.startswith(("generate", "schedule"))


def main(argv: list[str]) -> int:
    limit = None
    if argv[1:2] == ["--max"]:
        limit, argv = int(argv[2]), argv[2:]
    found = [f for p in argv[1:] for f in functions(Path(p))]
    for f in sorted(found, key=lambda f: -f.decisions):
        print(f"{f.decisions:4d}  {f.file}:{f.line}  {f.name}")
    over = [f for f in found if limit is not None and bounded(f) and f.decisions > limit]
    for f in over:
        print(f"{f.file}:{f.line}: {f.name} has {f.decisions} decision points, more than {limit}", file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
