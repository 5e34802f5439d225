#!/usr/bin/env python3
"""schedules/variants.json's spaces expanded into variants, each named from its parameters.

An entry of an operator's "spaces" names a schedule family ("schedule") and its parameter
values; a list of values spans them (the first parameter outermost), null in a list leaves
the parameter out (the generator's default). "types" lists the type combinations it is built
for, one token each: "bf16_sfp32_bias" is x bf16, scales fp32, a bias; "fp16_e5m2" is fp16
input, e5m2 codes (an operator's input_param names its input dtype's parameter, in_type
unless given). An entry with "spaces" of its own builds them for each of its types in turn
(the types outermost) with its other keys added. An operator's "generators" maps a stage or a
schedule to the generator that builds it (its "generator" builds the rest); a stage that names
its generator is not one of its parameters. Runtime settings ride along
(jit_max_registers, cublaslt_config, cublaslt_heuristic_rank); min_sm and the device follow
from the parameters unless "device" is given (autoscheduled entries). An operator's variants
keep the spaces' order: the untuned preference order within each type combination.

  variants.py cmake OUT   the CMake calls (cmake/variants.cmake includes OUT)
  variants.py list        name, operator, device, parameters: one variant a line
  variants.py same REF    whether the list equals the one REF's variants.json expands to
                          (order, names, parameters, settings); prints each difference
"""
from __future__ import annotations

import itertools
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SPACES = Path(__file__).resolve().parent.parent / "schedules" / "variants.json"
DTYPES = ("bf16", "fp16", "fp32")
FP8_FORMATS = ("e4m3", "e5m2")
# Runtime settings, not generator parameters, in the order the registry row lists them; also
# untuned_*: an untuned preference's bounds, which the operator's runtime reads, with the
# results file behind them in untuned_source (not in the row).
SETTINGS = ("jit_max_registers", "cublaslt_config", "cublaslt_heuristic_rank", "min_sm", "kernels_of")


def is_setting(key: str) -> bool:
    return key in SETTINGS or key.startswith("untuned_")
# cuBLASLt's tile and stages enums (cublasLtMatmulTile_t, cublasLtMatmulStages_t) by id.
CUBLASLT_TILES = {15: "64x64"}
CUBLASLT_STAGES = {24: "128x6"}


@dataclass
class Variant:
    op: str
    generator: str
    executable: str
    device: str
    params: dict[str, str]  # generator parameters, as given to it
    settings: dict[str, str] = field(default_factory=dict)  # runtime settings (is_setting)
    autoscheduler: str = ""
    name: str = ""
    stage_named_generator: bool = False

    def generator_params(self) -> dict[str, str]:
        """The parameters given to the generator: all but a stage that named it."""
        return {k: x for k, x in self.params.items() if k != "stage" or not self.stage_named_generator}


def text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)  # as Halide's GeneratorParam<bool> reads it


def type_params(op: dict[str, Any], token: str) -> dict[str, str]:
    """The parameters a type token stands for ("bf16_sfp32_bias", "fp16_e4m3", "fp32")."""
    out: dict[str, str] = {}
    for part in token.split("_"):
        if part in DTYPES:
            out[op.get("input_param", "in_type")] = part
        elif part[:1] == "s" and part[1:] in DTYPES:
            out["scale_type"] = part[1:]
        elif part == "bias":
            out["with_bias"] = "true"
        elif part in FP8_FORMATS:
            out["fp8"] = part
        else:
            raise ValueError(f"variants.json: unknown part {part!r} of type token {token!r}")
    return out


def type_token(p: dict[str, str]) -> str:
    """The inverse of type_params: the name's part for the variant's types."""
    parts = [p.get("x_type", p.get("in_type", ""))]
    parts += ["s" + p["scale_type"]] if "scale_type" in p else []
    parts += ["bias"] if p.get("with_bias") == "true" else []
    parts += [p["fp8"]] if "fp8" in p else []
    return "_".join(x for x in parts if x)


def flags(p: dict[str, str], words: list[tuple[str, str, str]]) -> str:
    """"_word" for each (key, value, word) whose parameter has that value."""
    return "".join("_" + w for k, v, w in words if p.get(k) == v)


def schedule_part(op: str, v: Variant) -> str:
    """The name's part for the schedule: its family and the parameters that set it apart."""
    p, s = v.params, v.params["schedule"]
    g = lambda k: p.get(k, "")  # noqa: E731
    if s == "auto":
        return f"auto_{v.autoscheduler.lower()}_{v.device}"
    outputs = g("outputs") + "_" if "outputs" in p else ""
    if op in ("w8_linear_epilogue", "w4_linear_epilogue"):
        return "cuda"
    if op == "w4_linear":
        rows = f"_r{g('rows_per_warp')}" if "rows_per_warp" in p else ""
        if s == "cuda_gemv":
            return "gemv" + rows + (f"_warps{g('warps')}" if "warps" in p else "")
        if s == "cuda_smallbatch":
            return f"b{g('batch')}" + rows
        if s == "cuda_mma":
            return f"mma_b{g('batch')}{rows}w{g('load_words')}_splitk{g('split_k')}"
        if g("stage") == "dequantize":
            return "dequant_cublas"
        return s + (f"_b{g('batch')}" if "batch" in p else "") + rows
    if op.startswith("w8_linear"):
        lane = f"r{g('rows_per_warp')}w{g('load_words')}" + flags(p, [("coalesced", "true", "coalesced")])
        lane += f"_v{g('vector_words')}" if "vector_words" in p else ""
        lane += flags(p, [("element_io", "true", "element"), ("k_tail", "true", "ktail"), ("evict_first", "true", "evict")])
        if s == "cuda_gemv":
            return "gemv_" + lane
        if s == "cuda_smallbatch":
            return f"b{g('batch')}_" + lane
        if s == "cuda_splitk":
            return f"splitk{g('split_k')}_r{g('rows_per_warp')}w{g('load_words')}" + flags(p, [("evict_first", "true", "evict")])
        if s == "cuda_mma":
            split = f"_splitk{g('split_k')}" if "split_k" in p else ""
            return f"mma_b{g('batch')}_r{g('rows_per_warp')}w{g('load_words')}{split}" + flags(p, [("k_tail", "true", "ktail")])
        if g("stage") == "planes":
            if "cublaslt_config" not in v.settings:
                return "planes_cublas_i8"
            algo, tile, stages = (int(x) for x in v.settings["cublaslt_config"].split(","))
            return f"planes_cublaslt_i8_a{algo}_t{CUBLASLT_TILES.get(tile, tile)}_s{CUBLASLT_STAGES.get(stages, stages)}"
        if g("stage") == "rescale":
            rank = v.settings.get("cublaslt_heuristic_rank")
            return "dequant_" + (f"cublaslt_h{rank}" if rank is not None else "cublas") + "_rescale"
        if g("stage") == "dequantize":
            return "dequant_cublas" + flags(p, [("coalesced", "true", "coalesced")])
        if s == "cpu":
            return "cpu" + (f"_b{g('batch')}" if "batch" in p else "") + (f"_r{g('rows_per_warp')}" if "rows_per_warp" in p else "")
        return s
    if op == "cast_transpose":
        divide = flags(p, [("scale_by", "divide", "divide")])
        if s == "cuda_tiled":
            tile = (g("tile_rows") + "x" if "tile_rows" in p else "") + g("tile")
            words = (f"w{g('load_words')}" if "load_words" in p else "") + (f"p{g('pad_words')}" if "pad_words" in p else "")
            return f"t{tile}r{g('rows_per_thread')}{words}" + flags(
                p, [("cols_io", "element", "cols_element"), ("io", "element", "element_io"), ("encoder", "ptx", "cvt"),
                    ("with_amax", "true", "amax")]) + divide
        if s == "cuda_skinny":
            return "skinny_" + g("long_dim") + divide
        tile = f"_t{g('tile_rows')}x{g('tile')}" if "tile" in p else ""
        return outputs + s + tile + flags(p, [("with_amax", "true", "amax")]) + divide
    if op.startswith("quantize_fp8"):
        if s == "cuda_tiled":
            return f"t128r{g('rows_per_thread')}" + flags(
                p, [("encoder", "ptx", "cvt"), ("vector_io", "true", "vec"), ("merged_maxima", "true", "merged"),
                    ("block_max_lanes", "256", "patches"), ("cols_from_rows", "true", "cols_from_rows")])
        if g("axis_pass") == "first":
            return f"2pass_s{g('strip_rows')}_" + ("cuda" if s == "cuda_strips" else s)
        if "tile" in p:
            return f"{s}_t{g('tile_rows')}x{g('tile')}"
        return outputs + s
    if op == "abs_max" and s == "cuda":
        return f"t{g('threads_x')}x{g('threads_y')}r{g('rows_per_thread')}w{g('load_words')}"
    return s


def variant_name(v: Variant) -> str:
    """The one derivation of a variant's name from its operator, parameters and settings."""
    prefix = v.op
    if v.op == "w8_linear_epilogue":
        prefix = "w8_linear_" + v.params["stage"]
    elif v.op == "quantize_fp8":
        prefix += "_" + v.params["recipe"]
    return "_".join(x for x in (prefix, type_token(v.params), schedule_part(v.op, v)) if x)


def min_sm(p: dict[str, str]) -> int:
    """The compute capability the runtime's PTX rewrite of its kernels needs: cvt's fp8
    pairs (sm_89), cache hints and mma.sync (sm_80); 0 for any device Halide targets."""
    if p.get("encoder") == "ptx":
        return 89
    return 80 if p.get("evict_first") == "true" or p.get("schedule") == "cuda_mma" else 0


def generator_of(o: dict[str, Any], params: dict[str, str]) -> tuple[str, bool]:
    """The generator of a variant: its stage's or its schedule's in the operator's map, else the
    operator's own; and whether its stage named it (then the stage is no parameter of it)."""
    by = o.get("generators", {})
    if params.get("stage") in by:
        return by[params["stage"]], True
    return by.get(params.get("schedule"), o["generator"]), False


def flat_entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries with each group ("spaces" of its own) unrolled: its types outermost."""
    out: list[dict[str, Any]] = []
    for entry in entries:
        if "spaces" not in entry:
            out.append(entry)
            continue
        shared = {k: x for k, x in entry.items() if k not in ("spaces", "types")}
        for token in entry["types"].split():
            for sub in entry["spaces"]:
                if "types" in sub or shared.keys() & sub.keys():
                    raise ValueError(f"variants.json: a grouped entry restates its group's keys: {sub}")
                out.append({**shared, **sub, "types": token})
    return out


def expand(spaces: dict[str, Any]) -> list[Variant]:
    out: list[Variant] = []
    for op, o in spaces["operators"].items():
        generated: dict[tuple[str, str], Variant] = {}
        for entry in flat_entries(o["spaces"]):
            entry = dict(entry)
            tokens = entry.pop("types", "").split() or [""]
            axes = [(k, v if isinstance(v, list) else [v]) for k, v in entry.items()]
            for values in itertools.product(*(vals for _, vals in axes)):
                given = {k: x for (k, _), x in zip(axes, values) if x is not None}
                device = given.pop("device", None)
                autoscheduler = given.pop("autoscheduler", "")
                for token in tokens:
                    params = type_params(o, token) if token else {}
                    params.update((k, text(x)) for k, x in given.items() if not is_setting(k))
                    s = {k: text(x) for k, x in given.items() if is_setting(k)}
                    dev = device or ("cpu" if params["schedule"] == "cpu" else "cuda")
                    if dev == "cuda" and min_sm(params):
                        s["min_sm"] = str(min_sm(params))
                    generator, by_stage = generator_of(o, params)
                    v = Variant(op, generator, o.get("generator_executable", "schedx_generators"), dev, params, s,
                                autoscheduler, stage_named_generator=by_stage)
                    v.name = variant_name(v)
                    # An entry that differs from an earlier one in runtime settings only calls
                    # its pipeline; a pipeline's CUDA module is loaded under one register cap.
                    key = (dev + autoscheduler, json.dumps(params, sort_keys=True))
                    owner = generated.setdefault(key, v)
                    if owner is not v:
                        if owner.settings.get("jit_max_registers") != s.get("jit_max_registers"):
                            raise ValueError(f"variants.json: {v.name} and {owner.name} differ in jit_max_registers only")
                        v.settings["kernels_of"] = owner.name
                    out.append(v)
    names = [v.name for v in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"variants.json: two variants derive the name {sorted(dup)}")
    return out


def row_text(v: Variant) -> str:
    """The registry row's "key=value ..." text: generator parameters, then runtime settings."""
    items = [f"{k}={v.params[k]}" for k in v.params]
    items += [f"{k}={v.settings[k]}" for k in SETTINGS if k in v.settings]
    items += [f"{k}={x}" for k, x in v.settings.items() if k.startswith("untuned_") and k != "untuned_source"]
    items += [f"autoscheduler={v.autoscheduler}"] if v.autoscheduler else []
    return " ".join(items)


def cmake(variants: list[Variant]) -> str:
    lines = ["# Generated by tools/variants.py from schedules/variants.json: do not edit."]
    for v in variants:
        params = " ".join(f"{k}={x}" for k, x in v.generator_params().items())
        lines.append(f"schedx_variant({v.name} {v.op} {v.device} {v.generator} {v.executable} "
                     f"{v.settings.get('kernels_of', v.name)} \"{v.autoscheduler}\" \"{params}\" \"{row_text(v)}\")")
    return "\n".join(lines) + "\n"


def differences(old: list[Variant], new: list[Variant]) -> list[str]:
    """Each place where two expanded lists differ: order, names, parameters (as sets of
    key=value; their order is not a variant's), settings, device, autoscheduler. Not which
    generator builds a variant: tools/stmt_identity.sh compares what it builds."""
    def key(v: Variant) -> tuple[Any, ...]:
        return (v.name, v.op, v.device, v.autoscheduler, sorted(v.params.items()), sorted(v.settings.items()))
    out = [f"{i}: {a.name} became {b.name}" for i, (a, b) in enumerate(zip(old, new)) if a.name != b.name]
    out += [f"{a.name}: {key(a)} became {key(b)}" for a, b in zip(old, new) if a.name == b.name and key(a) != key(b)]
    out += [f"only before: {v.name}" for v in old[len(new):]] + [f"only now: {v.name}" for v in new[len(old):]]
    return out


def main(argv: list[str]) -> int:
    spaces = json.loads(SPACES.read_text())
    variants = expand(spaces)
    if argv[1:2] == ["same"] and len(argv) == 3:
        rel = SPACES.relative_to(SPACES.parent.parent).as_posix()
        old = subprocess.run(["git", "-C", str(SPACES.parent), "show", f"{argv[2]}:{rel}"], check=True,
                             capture_output=True, text=True).stdout
        diff = differences(expand(json.loads(old)), variants)
        print("\n".join(diff) or f"{len(variants)} variants, as {argv[2]} expands them")
        return 1 if diff else 0
    if argv[1:2] == ["cmake"] and len(argv) == 3:
        out = Path(argv[2])
        new = cmake(variants)
        if not out.exists() or out.read_text() != new:
            out.write_text(new)
    elif argv[1:] == ["list"]:
        for v in variants:
            print(f"{v.name} {v.op} {v.device} {row_text(v)}")
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
