"""Runs schedx-explore on the CPU for each operator on two small shapes and checks what it
writes: every database line is a complete record, the CSV has one row per measurement,
the SVG is XML with a bar per measured variant, and dispatch afterwards uses the recorded
shapes; then one --dirty-cache run.

Usage: check_explore.py path/to/schedx-explore
"""
import csv
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

# op -> (shapes, argument sets explored per shape)
RUNS = {"cast_transpose": ({"64x64": [64, 64], "128x96": [128, 96]}, 3),  # bf16, bf16+amax, bf16/divide
        "w8_linear": ({"1x64x64": [1, 64, 64], "4x128x96": [4, 128, 96]}, 4),  # bf16, bf16+bias, fp16, bf16+sfp32
        "quantize_fp8": ({"64x64": [64, 64], "130x96": [130, 96]}, 4),
        "abs_max": ({"64x64": [64, 64], "128x96": [128, 96]}, 3)}
RECORD_KEYS = {"op", "dtypes", "shape", "device", "device_name", "driver_version", "library_version",
               "variant", "median_us", "p10_us", "p90_us", "repeats", "timing", "date"}


def check_run(explore, tmp, op, shapes, argument_sets):
    db, table, chart = (Path(tmp) / f"{op}.{ext}" for ext in ("jsonl", "csv", "svg"))
    run = subprocess.run([explore, "--device", "cpu", "--op", op, "--shapes", ",".join(shapes), "--repeats", "3",
                          "--db", str(db), "--csv", str(table), "--svg", str(chart)],
                         capture_output=True, text=True, check=True)
    print(run.stdout)

    records = [json.loads(line) for line in db.read_text().splitlines()]
    assert records, "no records"
    for r in records:
        assert set(r) == RECORD_KEYS, r
        assert r["op"] == op and r["device"] == "cpu" and r["driver_version"] == 0, r
        assert r["shape"] in shapes.values() and 0 < r["p10_us"] <= r["median_us"] <= r["p90_us"], r
        assert r["timing"] == "back_to_back", r
    assert {tuple(r["shape"]) for r in records} == {tuple(s) for s in shapes.values()}

    rows = list(csv.DictReader(table.open()))
    measured = [r for r in rows if r["status"] == "ok"]
    assert len(measured) == len(records), (len(measured), len(records))
    dispatch = [r for r in rows if r["status"] == "dispatch"]
    assert len(dispatch) == argument_sets * len(shapes), dispatch
    assert all(r["note"] == "tuned exact shape" for r in dispatch), dispatch
    assert all(float(r["median_us"]) > 0 and float(r["percent_of_ceiling"]) > 0 for r in measured + dispatch)

    svg = ET.parse(chart).getroot()
    assert svg.tag == "{http://www.w3.org/2000/svg}svg", svg.tag
    bars = svg.findall("{http://www.w3.org/2000/svg}rect")
    assert len(bars) == 1 + len(measured) + len(dispatch), len(bars)  # background, then one per bar
    texts = " ".join(t.text or "" for t in svg.iter("{http://www.w3.org/2000/svg}text"))
    assert all(r["variant"] in texts for r in measured)


def caps(listing):
    """{variant name: its jit_max_registers entry or None} of a --list output."""
    out = {}
    for line in listing.splitlines():
        words = line.split()
        if words and words[0].startswith(("cast_transpose_", "w8_linear_")):
            cap = [w.split("=", 1)[1] for w in words if w.startswith("jit_max_registers=")]
            out[words[0]] = cap[0] if cap else None
    return out


def check_cap_override(explore, listing):
    """SCHEDX_JIT_MAX_REGISTERS replaces the cap of the variants it names, and only theirs."""
    env = dict(os.environ, SCHEDX_JIT_MAX_REGISTERS="b4_r4w4=96,no_such_variant=40")
    over = subprocess.run([explore, "--list"], capture_output=True, text=True, check=True, env=env).stdout
    before, after = caps(listing), caps(over)
    assert before.keys() == after.keys() and any("b4_r4w4" in v for v in before), sorted(before)
    for name, cap in before.items():
        assert after[name] == ("96" if "b4_r4w4" in name else cap), (name, cap, after[name])


def check_dirty_cache(explore, tmp):
    """--dirty-cache times each call alone after dirtying the cache, and records like a normal run."""
    db = Path(tmp) / "dirty.jsonl"
    run = subprocess.run([explore, "--device", "cpu", "--op", "w8_linear", "--shapes", "1x64x64", "--variants",
                          "bf16_sbf16_cpu_r8", "--repeats", "1", "--dirty-cache", "--db", str(db)],
                         capture_output=True, text=True, check=True)
    print(run.stdout)
    assert "Timing: each call alone, after a write of" in run.stdout, run.stdout
    records = [json.loads(line) for line in db.read_text().splitlines()]
    assert [r["variant"] for r in records] == ["w8_linear_bf16_sbf16_cpu_r8"], records
    assert records[0]["median_us"] > 0 and records[0]["shape"] == [1, 64, 64], records
    assert records[0]["timing"] == "dirty_cache", records  # dispatch ranks these above back-to-back ones


def check_configs(explore, tmp):
    """--configs narrows the input configurations; one that no selected operator has is an error."""
    db = Path(tmp) / "configs.jsonl"
    subprocess.run([explore, "--device", "cpu", "--op", "w8_linear", "--shapes", "1x64x64", "--repeats", "1",
                    "--configs", "fp16", "--db", str(db)], capture_output=True, text=True, check=True)
    records = [json.loads(line) for line in db.read_text().splitlines()]
    assert records and all(r["dtypes"] == "fp16*int8*fp32->fp16" for r in records), records
    bad = subprocess.run([explore, "--device", "cpu", "--op", "w8_linear", "--shapes", "1x64x64", "--configs", "fp8",
                          "--db", str(db)], capture_output=True, text=True)
    assert bad.returncode != 0 and "no selected operator has the configuration fp8" in bad.stderr, bad


def check_help_and_empty_selection(explore, tmp):
    """--help says how each operator writes its shapes; --variants naming no variant fails."""
    usage = subprocess.run([explore, "--help"], capture_output=True, text=True, check=True).stdout
    assert "w8_linear MxNxK" in usage and "cast_transpose MxK" in usage, usage
    bad = subprocess.run([explore, "--device", "cpu", "--op", "w8_linear", "--shapes", "1x64x64", "--variants",
                          "nonexistent", "--db", str(Path(tmp) / "none.jsonl")], capture_output=True, text=True)
    assert bad.returncode != 0, bad
    assert "--variants: no cpu variant of w8_linear has 'nonexistent' in its name" in bad.stderr, bad.stderr
    assert not (Path(tmp) / "none.jsonl").exists()


def main(explore):
    with tempfile.TemporaryDirectory() as tmp:
        for op, (shapes, argument_sets) in RUNS.items():
            check_run(explore, tmp, op, shapes, argument_sets)
        check_dirty_cache(explore, tmp)
        check_configs(explore, tmp)
        check_help_and_empty_selection(explore, tmp)
    listing = subprocess.run([explore, "--list"], capture_output=True, text=True, check=True).stdout
    assert "cast_transpose_bf16_cpu " in listing and "w8_linear_bf16_sbf16_cpu " in listing, listing
    check_cap_override(explore, listing)
    print("schedx-explore outputs are valid")


if __name__ == "__main__":
    main(sys.argv[1])
