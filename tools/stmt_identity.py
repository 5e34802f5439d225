#!/usr/bin/env python3
"""Whether two versions of schedx generate the same pipelines: each variant's lowered statement
(Halide's .stmt, with the PTX of CUDA variants) from both, compared byte for byte.

  stmt_identity.py OLD NEW [--jobs N] [--only REGEX] [--work DIR]

OLD and NEW are each a commit (checked out, configured and its generators built under --work)
or a build directory of this project, used as it is: its generator executables and its variant
list (runtime/variants_expanded.cmake), nothing rebuilt there. Every variant that owns a pipeline is generated again with
-e stmt, for each of its targets (a CPU variant's every CPU target). The report lists the
variants whose registry row (parameters and settings) is unchanged but whose statements differ,
those whose row changed, and those in one version only; exit 1 when an unchanged row's
statement differs or a generator fails.
"""
from __future__ import annotations

import argparse
import filecmp
import json
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Pipeline:
    name: str
    device: str
    generator: str
    executable: str
    autoscheduler: str
    params: list[str]
    row: str


def run(cmd: list[str], **kw: object) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout  # type: ignore[call-overload]


def halide_dir(python: str) -> Path:
    return Path(run([python, "-c", "import halide; print(halide.install_dir())"]).strip())


def build_dir(spec: str, work: Path) -> tuple[Path, bool]:
    """A build of `spec` and whether to build its generators: a build directory as it is, or a
    commit configured under work."""
    if (Path(spec) / "build.ninja").exists():
        return Path(spec), False
    sha = run(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{spec}^{{commit}}"]).strip()
    src, build = work / sha[:12] / "src", work / sha[:12] / "build"
    if not src.exists():
        run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(src), sha])
    if not (build / "build.ninja").exists():
        venv = ROOT / ".venv" / "bin"
        halide = halide_dir(str(venv / "python"))
        run([str(venv / "cmake"), "-S", str(src), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
             f"-DCMAKE_MAKE_PROGRAM={venv / 'ninja'}", f"-DHalide_DIR={halide / 'lib64' / 'cmake' / 'Halide'}",
             f"-DPython3_EXECUTABLE={venv / 'python'}", "-DSCHEDX_TESTS=OFF", "-DSCHEDX_BENCH=OFF"])
    return build, True


def pipelines(build: Path) -> list[Pipeline]:
    out = []
    for line in (build / "runtime" / "variants_expanded.cmake").read_text().splitlines():
        if not line.startswith("schedx_variant("):
            continue
        name, _op, device, generator, executable, kernels, autoscheduler, params, row = shlex.split(line[15:-1])
        if kernels == name:  # a variant with a pipeline of its own
            out.append(Pipeline(name, device, generator, executable, autoscheduler, params.split(), row))
    return out


def targets(build: Path) -> dict[str, list[str]]:
    cache = (build / "CMakeCache.txt").read_text()
    source = Path(re.search(r"^schedx_SOURCE_DIR:STATIC=(.*)$", cache, re.M).group(1))  # type: ignore[union-attr]
    t = json.loads((source / "schedules" / "variants.json").read_text())["targets"]
    return {"cpu": t["cpu"].split(","), "cuda": [t["cuda"]]}


def generate(build: Path, out: Path, halide: Path, p: Pipeline, target_list: list[str]) -> list[str]:
    """The pipeline's statements (one per target), or the error."""
    files = []
    for i, target in enumerate(target_list):
        d = out / str(i)
        d.mkdir(parents=True, exist_ok=True)
        cmd = [str(build / "generators" / p.executable), "-g", p.generator, "-o", str(d), "-e", "stmt", "-f", p.name,
               f"target={target}-no_runtime", *p.params]
        if p.autoscheduler:
            cmd += ["-p", str(halide / "lib64" / f"libautoschedule_{p.autoscheduler.lower()}.so"),
                    f"autoscheduler={p.autoscheduler}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{p.name}: {' '.join(cmd)}\n{r.stderr[-2000:]}")
        files.append(str(d / f"{p.name}.stmt"))
    return files


def statements(spec: str, work: Path, jobs: int, only: str) -> tuple[dict[str, Pipeline], dict[str, list[str]]]:
    build, make = build_dir(spec, work)
    halide = halide_dir(str(ROOT / ".venv" / "bin" / "python"))
    found = [p for p in pipelines(build) if re.search(only, p.name)]
    if make:
        run([str(ROOT / ".venv" / "bin" / "ninja"), "-C", str(build), *sorted({p.executable for p in found})])
    out = work / "stmt" / build.resolve().as_posix().strip("/").replace("/", "_")
    t = targets(build)
    with ThreadPoolExecutor(jobs) as pool:
        done = dict(zip((p.name for p in found), pool.map(lambda p: generate(build, out, halide, p, t[p.device]), found)))
    return {p.name: p for p in found}, done


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="", help="only the variants whose names match this regular expression")
    ap.add_argument("--work", type=Path, default=Path("/tmp/schedx_stmt_identity"))
    a = ap.parse_args(argv[1:])
    old, old_files = statements(a.old, a.work, a.jobs, a.only)
    new, new_files = statements(a.new, a.work, a.jobs, a.only)
    same, differ, changed = [], [], []
    for name in [n for n in new if n in old]:
        if old[name].row != new[name].row:
            changed.append(name)
        elif all(filecmp.cmp(f, g, shallow=False) for f, g in zip(old_files[name], new_files[name])):
            same.append(name)
        else:
            differ.append(name)
    print(f"{len(same)} pipelines with unchanged parameters generate identical statements")
    for title, names in (("unchanged parameters, different statements", differ), ("parameters changed", changed),
                         ("only in " + a.old, [n for n in old if n not in new]),
                         ("only in " + a.new, [n for n in new if n not in old])):
        if names:
            print(f"{len(names)} {title}:\n  " + "\n  ".join(names))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
