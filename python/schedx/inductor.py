"""torch.compile finds schedx in unchanged code: a post-grad graph pass for Inductor.

    import schedx.inductor
    schedx.inductor.enable()          # or: with schedx.inductor.enabled(): ...
    model = torch.compile(model)      # the user's code, unchanged

The pass rewrites, in each graph Inductor compiles (forward and backward alike):
  - the fp8 cast with its transposed copy, `f = clamp(x * s, -fmax, fmax).to(fp8)` and
    `f.t().contiguous()` (with or without the final `.t()`), into schedx's cast_transpose_fp8,
    and either one alone into cast_transpose_fp8_out with the other output null; `x / s` the
    same with divide=True (IEEE fp32 division, as eager), its amax, if any, left to Inductor;
    with `max|x|` of the same x in the graph (delayed scaling), into cast_transpose_fp8_amax;
    with torchao's tensorwise scale of that amax (current scaling), into
    cast_transpose_fp8_current_scaling;
  - the weight-only int8 linear, `mm(x, W.to(x.dtype).t()) * scales (+ bias)` as gpt-fast and
    torchao's int8 weight-only tensors trace, 2-D or 3-D x, into w8_linear;
  - the int4 linear of torch's int4pack kernels, `aten._weight_int4pack_mm(x, W, g, sz)` (or its
    _for_cpu form) as gpt-fast's int4 and torchao's tinygemm int4 trace, into w4_linear, where W
    and sz are constants (torch._inductor.config.freezing = True): the pass repacks them once,
    at compile time (schedx.int4.repack_int4pack, its zero points rounded as documented there);
    on the devices in INT4PACK_DEVICES (CUDA).
A match is rewritten only where schedx supports the call; everything else stays Inductor's,
and `last_report()` (and the logger "schedx.inductor" at INFO) says what was rewritten and why
each near miss was not. docs/pytorch.md lists the spellings matched and the reasons.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import hashlib
import logging
import operator
from typing import Any, Callable, Iterator, Optional, Union

import torch
from torch._inductor import config as inductor_config
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files
from torch.fx import Graph, Node
from torch.fx.experimental.symbolic_shapes import statically_known_true

from . import _capi
from . import int4 as _int4
from . import ops as _ops

__all__ = ["Pattern", "Rewrite", "Skip", "GraphReport", "SchedxGraphPass", "enable", "disable", "enabled",
           "is_enabled", "last_report", "reports", "INT4PACK_DEVICES"]

log = logging.getLogger(__name__)
aten, prims = torch.ops.aten, torch.ops.prims

FP8_MAX = {torch.float8_e4m3fn: torch.finfo(torch.float8_e4m3fn).max,
           torch.float8_e5m2: torch.finfo(torch.float8_e5m2).max}
CAST_X_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
W8_X_DTYPES = (torch.bfloat16, torch.float16)
W8_SCALE_DTYPES = (torch.bfloat16, torch.float32)
# schedx_w4_linear's (x, scales) dtypes: fp16 x takes fp16 scales only.
W4_DTYPES = ((torch.bfloat16, torch.bfloat16), (torch.bfloat16, torch.float16), (torch.float16, torch.float16))
_INT4PACK_MM = (aten._weight_int4pack_mm.default, aten._weight_int4pack_mm_for_cpu.default)
# Where the int4pack linear is rewritten: on CUDA schedx's kernels beat tinygemm's; on an AVX-512
# CPU aten's kernel ran gpt-fast's module as fast or faster, so the rewrite slowed it (docs/pytorch.md).
INT4PACK_DEVICES: tuple[str, ...] = ("cuda",)
# torchao's tensorwise scale clamps amax to this before dividing (schedx.h, current scaling).
AMAX_EPS = 1e-12
SUPPORTED_DEVICES = ("cpu", "cuda")

_VIEWS = (aten.view.default, aten.reshape.default, aten._unsafe_view.default)
_CLAMP_SCALARS = (aten.clamp_min.default, aten.clamp_max.default, aten.clamp.default)
_CLAMP_TENSORS = (aten.clamp_min.Tensor, aten.clamp_max.Tensor, aten.clamp.Tensor)
_MAXIMA = (aten.max.default, aten.amax.default)


class Pattern(enum.Enum):
    CAST_TRANSPOSE = "cast_transpose"
    CAST_TRANSPOSE_AMAX = "cast_transpose_amax"
    CURRENT_SCALING = "current_scaling"
    W8_LINEAR = "w8_linear"
    W4_LINEAR = "w4_linear"


@dataclasses.dataclass(frozen=True)
class Rewrite:
    pattern: Pattern
    node: str    # the node whose value schedx now computes
    detail: str  # dtypes and shape


@dataclasses.dataclass(frozen=True)
class Skip:
    pattern: Pattern
    node: str
    reason: str


@dataclasses.dataclass
class GraphReport:
    rewrites: list[Rewrite] = dataclasses.field(default_factory=list)
    skips: list[Skip] = dataclasses.field(default_factory=list)

    def count(self, pattern: Pattern) -> int:
        return sum(r.pattern is pattern for r in self.rewrites)


_REPORTS_KEPT = 64
_reports: list[GraphReport] = []


def last_report() -> Optional[GraphReport]:
    """What the pass did in the last graph it ran on (None before any). A graph served by
    Inductor's FX graph cache runs no pass and adds no report."""
    return _reports[-1] if _reports else None


def reports() -> list[GraphReport]:
    """The reports of the last graphs the pass ran on, oldest first (at most 64)."""
    return list(_reports)


# ------------------------------------------------------------------ graph helpers

def _val(n: Any) -> Any:
    return n.meta.get("val") if isinstance(n, Node) else None


def _is(n: Any, *targets) -> bool:
    return isinstance(n, Node) and n.op == "call_function" and n.target in targets


def _arg(n: Node, i: int, name: str, default: Any = None) -> Any:
    return n.args[i] if len(n.args) > i else n.kwargs.get(name, default)


def _known(cond) -> bool:
    """True where a (possibly symbolic) condition holds for every size the graph takes."""
    return statically_known_true(cond)


def _tensor_ok(v: Any, devices: tuple[str, ...] = SUPPORTED_DEVICES) -> bool:
    return isinstance(v, torch.Tensor) and v.device.type in devices


def _single_user(n: Node) -> bool:
    return len(n.users) == 1


def _emit(graph: Graph, target: Callable, *args: Any, **kwargs: Any) -> Node:
    """A call node with its fake value computed from its inputs' (what Inductor's lowering reads)."""
    node = graph.call_function(target, args, kwargs)
    fake_args, fake_kwargs = torch.fx.node.map_arg((args, kwargs), _val)
    vals = [v for v in torch.utils._pytree.tree_leaves((fake_args, fake_kwargs)) if isinstance(v, torch.Tensor)]
    mode = torch._guards.detect_fake_mode(vals)
    with (mode if mode is not None else contextlib.nullcontext()):
        node.meta["val"] = target(*fake_args, **fake_kwargs)
    return node


def _ancestors(n: Node, limit: int = 64) -> set[Node]:
    seen: set[Node] = set()
    stack = [n]
    while stack and len(seen) < limit:
        for a in stack.pop().all_input_nodes:
            if a not in seen:
                seen.add(a)
                stack.append(a)
    return seen


def _describe(v: torch.Tensor) -> str:
    return f"{str(v.dtype).removeprefix('torch.')} {list(v.shape)} on {v.device.type}"


# ------------------------------------------------------------------ the fp8 cast

@dataclasses.dataclass
class _Cast:
    convert: Node       # prims.convert_element_type(..., fp8)
    x: Node             # the program's x, [M, K] bf16, fp16 or fp32
    scale: Node         # one fp32 element
    dtype: torch.dtype
    cols: list[Node]    # copies of f that are schedx's transposed output (below), [K, M] contiguous
    rows: bool          # f itself is read (not only through those copies)
    divide: bool        # x / s (scale is the divisor), else x * s
    # What schedx casts: x itself (unit last stride; cols are f.t().contiguous()), or W where x is
    # W.t() of a row-major W (transposed: f is W's rows output viewed as W.t(), and cols are
    # contiguous copies of f: W's transposed output), as torchao's Float8Linear casts its weight.
    source: Node
    transposed: bool = False


_UNKNOWN = object()


def _bound(b: Any) -> Any:
    """A clamp bound's value: a number, None for no bound, or _UNKNOWN for a tensor whose value
    the graph does not state (a 0-dim tensor made in the program is a full([], v) node)."""
    if b is None or isinstance(b, (int, float)):
        return b
    if _is(b, aten.full.default) and list(b.args[0]) == [] and isinstance(b.args[1], (int, float)):
        return b.args[1]
    return _UNKNOWN


def _contiguous_copy(n: Node) -> bool:
    """n is x.contiguous() (or x.clone()): a row-major copy."""
    return _is(n, aten.clone.default) and \
        n.kwargs.get("memory_format", torch.contiguous_format) == torch.contiguous_format


def _is_transpose(n: Any) -> bool:
    """n is x.t() of a 2-D x."""
    return _is(n, aten.permute.default) and list(n.args[1]) == [1, 0]


def _match_cast(conv: Node) -> Union[_Cast, str, None]:
    """The cast ending at `conv`, a reason it is not schedx's, or None for no fp8 cast."""
    if not _is(conv, prims.convert_element_type.default) or conv.args[1] not in FP8_MAX:
        return None
    dtype = conv.args[1]
    fmax = FP8_MAX[dtype]
    lo, hi, v = -float("inf"), float("inf"), conv.args[0]
    if _is(v, prims.convert_element_type.default):
        return (f"the scaled x is rounded to {v.args[1]} before the cast (a 0-dim scale keeps x's dtype); "
                "schedx computes it in fp32")
    while _is(v, *_CLAMP_SCALARS, *_CLAMP_TENSORS):
        if not _single_user(v):
            return "an intermediate of the cast is used elsewhere"
        low = v.args[1] if v.target in (aten.clamp_min.default, aten.clamp_min.Tensor) else (
            _arg(v, 1, "min") if v.target in (aten.clamp.default, aten.clamp.Tensor) else None)
        high = v.args[1] if v.target in (aten.clamp_max.default, aten.clamp_max.Tensor) else (
            _arg(v, 2, "max") if v.target in (aten.clamp.default, aten.clamp.Tensor) else None)
        low, high = _bound(low), _bound(high)
        if low is _UNKNOWN or high is _UNKNOWN:
            return "a clamp bound is a tensor whose value is unknown at compile time (a graph input)"
        if _val(v).dtype != torch.float32:
            return f"the clamp computes in {_val(v).dtype}; schedx computes in fp32"
        lo, hi = (lo if low is None else max(lo, low)), (hi if high is None else min(hi, high))
        v = v.args[0]
    if (lo, hi) != (-fmax, fmax):
        return f"the clamp is to ({lo}, {hi}), not to +-{fmax}: schedx saturates to the format's range"
    if not _is(v, aten.mul.Tensor, aten.div.Tensor) or not _single_user(v):
        return "the clamped value is not x * s or x / s used only by the cast"
    divide = v.target is aten.div.Tensor
    op = "/" if divide else "*"
    a, b = v.args
    va, vb = _val(a), _val(b)
    if not (isinstance(va, torch.Tensor) and isinstance(vb, torch.Tensor)):
        return "the scale is a Python number, not a tensor"
    # x / s divides by the second operand only; a product takes the scale on either side.
    x, scale = (a, b) if divide or (va.dim() == 2 and _known(vb.numel() == 1)) else (b, a)
    vx, vs = _val(x), _val(scale)
    if vx.dim() != 2 or not _known(vs.numel() == 1) or vs.dtype != torch.float32:
        return f"not a 2-D x {op} a one-element float32 scale"
    if _val(v).dtype != torch.float32:
        return f"x {op} s is computed in {_val(v).dtype} (a 0-dim scale keeps x's dtype); schedx computes it in fp32"
    if _is(x, prims.convert_element_type.default) and x.args[1] == torch.float32 and \
            _val(x.args[0]).dtype in CAST_X_DTYPES:
        x = x.args[0]  # x.float() * s (or / s): schedx reads x in its own dtype, exactly widened
        vx = _val(x)
    if vx.dtype not in CAST_X_DTYPES:
        return f"x is {vx.dtype}: schedx casts bf16, fp16 or fp32"
    if not (_tensor_ok(vx) and _tensor_ok(vs) and vx.device == vs.device):
        return f"x on {vx.device} and the scale on {vs.device}: schedx needs both on one CPU or CUDA device"
    if not _known(vx.stride(1) == 1) and not _known(vx.shape[1] == 1):
        w = x.args[0] if _is_transpose(x) else None
        if w is None or not _known(_val(w).stride(1) == 1):
            return f"x has strides {tuple(vx.stride())}: schedx would copy it to row-major first"
        # x = W.t(): f is W's cast viewed transposed, and f's contiguous copies W's transposed output.
        copies = [u for u in conv.users if _contiguous_copy(u)]
        return _Cast(conv, x, scale, dtype, copies, rows=any(u not in copies for u in conv.users), divide=divide,
                     source=w, transposed=True)
    # f.t().contiguous() nodes: each transpose of f whose only users are contiguous copies.
    transposes = [p for p in conv.users if _is_transpose(p) and all(_contiguous_copy(u) for u in p.users)]
    cols = [u for p in transposes for u in p.users]
    return _Cast(conv, x, scale, dtype, cols, rows=any(u not in transposes for u in conv.users), divide=divide,
                 source=x)


def _absmax_of(x: Node, w: Optional[Node] = None) -> Optional[Node]:
    """A node computing max|x| over all of x (x or x.float()), 0-dim, if the graph has one; where
    x is W.t(), over W or any W.t() (the same elements)."""
    views = [x] if w is None else [w] + [p for p in w.users if _is_transpose(p)]
    sources = views + [u for v in views for u in v.users
                       if _is(u, prims.convert_element_type.default) and u.args[1] == torch.float32]
    for src in sources:
        for a in src.users:
            if not _is(a, aten.abs.default):
                continue
            for m in a.users:
                if _is(m, aten.max.default) or (_is(m, aten.amax.default) and not _arg(m, 2, "keepdim", False)
                                                and sorted(_arg(m, 1, "dim", []) or range(2)) == [0, 1]):
                    return m
    return None


def _current_scale_of(scale: Node, amax: Node, dtype: torch.dtype) -> Optional[bool]:
    """pow2_scales if `scale` is torchao's tensorwise scale of `amax` in the post-grad graph,
    fp32(fmax / clamp(fp64(amax), 1e-12)) then optionally exp2(floor(log2(.))); else None."""
    pow2 = False
    n = scale
    if _is(n, aten.exp2.default) and _is(n.args[0], aten.floor.default) and _is(n.args[0].args[0], aten.log2.default):
        pow2, n = True, n.args[0].args[0].args[0]
    if not (_is(n, prims.convert_element_type.default) and n.args[1] == torch.float32):
        return None
    q = n.args[0]
    if not _is(q, aten.mul.Tensor) or set(map(type, q.args)) != {Node, float}:
        return None
    recip = next(a for a in q.args if isinstance(a, Node))
    if next(a for a in q.args if not isinstance(a, Node)) != FP8_MAX[dtype] or not _is(recip, aten.reciprocal.default):
        return None
    c = recip.args[0]
    if not (_is(c, aten.clamp_min.default) and c.args[1] == AMAX_EPS):
        return None
    wide = c.args[0]
    if not (_is(wide, prims.convert_element_type.default) and wide.args[1] == torch.float64 and wide.args[0] is amax):
        return None
    return pow2


def _rewrite_cast(graph: Graph, m: _Cast, report: GraphReport, order: dict[Node, int]) -> None:
    vx = _val(m.x)
    amax = _absmax_of(m.x, m.source if m.transposed else None)
    pow2 = None
    if amax is not None and m.divide:
        report.skips.append(Skip(Pattern.CAST_TRANSPOSE_AMAX, m.convert.name,
                                 "x / s: schedx's divide cast has no fused amax, so the amax stays Inductor's"))
        amax = None
    if amax is not None and amax in _ancestors(m.scale) and not (m.rows and m.cols):
        report.skips.append(Skip(Pattern.CURRENT_SCALING, m.convert.name,
                                 "current scaling writes both orientations and only one is used: cast alone"))
        amax = None
    if amax is not None and amax in _ancestors(m.scale):
        pow2 = _current_scale_of(m.scale, amax, m.dtype)
        if pow2 is None:  # the scale comes from the amax by other math: cast with it, keep the amax
            report.skips.append(Skip(Pattern.CURRENT_SCALING, m.convert.name,
                                     "the scale is not torchao's fp8_max / clamp(amax, 1e-12): cast alone"))
            amax = None
    replaced = [m.convert, *m.cols] + ([amax] if amax is not None else []) + ([m.scale] if pow2 is not None else [])
    first = min(replaced, key=order.__getitem__)
    inputs = [m.source] if pow2 is not None else [m.source, m.scale]
    if any(order[i] > order[first] for i in inputs):
        report.skips.append(Skip(Pattern.CAST_TRANSPOSE_AMAX, m.convert.name,
                                 "the amax is used before the scale is computed: cast alone"))
        amax, replaced = None, [m.convert, *m.cols]
        first = min(replaced, key=order.__getitem__)
    detail = (f"{_describe(vx)}{' as W.t()' if m.transposed else ''}{' / s' if m.divide else ''} "
              f"to {str(m.dtype).removeprefix('torch.')}")
    if not (m.rows and m.cols):
        _rewrite_one_orientation(graph, m, amax, first)
        report.rewrites.append(Rewrite(Pattern.CAST_TRANSPOSE_AMAX if amax is not None else Pattern.CAST_TRANSPOSE,
                                       m.convert.name,
                                       f"{detail}, " + ("rows" if m.rows else "the transposed copy") + " only"))
        return
    with graph.inserting_before(first):
        if pow2 is not None:
            pattern = Pattern.CURRENT_SCALING
            out = _emit(graph, torch.ops.schedx.cast_transpose_fp8_current_scaling.below_autograd, m.source, m.dtype,
                        pow2)
            amax_out, scale_out = (_emit(graph, operator.getitem, out, 2), _emit(graph, operator.getitem, out, 3))
            new_scale = _emit(graph, aten.reshape.default, scale_out, list(_val(m.scale).shape))
            m.scale.replace_all_uses_with(new_scale)
        elif amax is not None:
            pattern = Pattern.CAST_TRANSPOSE_AMAX
            out = _emit(graph, torch.ops.schedx.cast_transpose_fp8_amax.below_autograd, m.source, m.scale, m.dtype)
            amax_out = _emit(graph, operator.getitem, out, 2)
        else:
            pattern = Pattern.CAST_TRANSPOSE
            out = _emit(graph, torch.ops.schedx.cast_transpose_fp8.below_autograd, m.source, m.scale, m.dtype,
                        **_divide_kwargs(m))
        rows = _emit(graph, operator.getitem, out, 0)
        if m.transposed:  # f as the program has it: W's cast viewed as W.t()
            rows = _emit(graph, aten.permute.default, rows, [1, 0])
        cols = _emit(graph, operator.getitem, out, 1)
        cols_t = _emit(graph, aten.permute.default, cols, [1, 0])
        if amax is not None:  # max|x| is exact in x's dtype: the fp32 amax converts back exactly
            new_amax = _emit(graph, aten.reshape.default, amax_out, [])
            if _val(amax).dtype != torch.float32:
                new_amax = _emit(graph, prims.convert_element_type.default, new_amax, _val(amax).dtype)
            amax.replace_all_uses_with(new_amax)
    m.convert.replace_all_uses_with(rows)
    for clone in m.cols:
        clone.replace_all_uses_with(cols_t)
    report.rewrites.append(Rewrite(pattern, m.convert.name, detail))


def _divide_kwargs(m: _Cast) -> dict[str, bool]:
    """The cast ops' divide argument, given only where set (a multiply's call reads as before)."""
    return {"divide": True} if m.divide else {}


def _rewrite_one_orientation(graph: Graph, m: _Cast, amax: Optional[Node], first: Node) -> None:
    """f alone or f.t().contiguous() alone: cast_transpose_fp8_out into new buffers, the other
    orientation not written (a null output in schedx's ABI)."""
    with graph.inserting_before(first):
        if m.rows:
            out = _emit(graph, aten.empty_like.default, m.source, dtype=m.dtype, memory_format=torch.contiguous_format)
            rows, cols = out, None
        else:  # cols is (M, K) with strides (1, M): a transposed view of a [K, M] buffer
            xt = _emit(graph, aten.permute.default, m.source, [1, 0])
            out = _emit(graph, aten.empty_like.default, xt, dtype=m.dtype, memory_format=torch.contiguous_format)
            rows, cols = None, _emit(graph, aten.permute.default, out, [1, 0])
        amax_out = scale_inv = None
        if amax is not None:
            amax_out = _emit(graph, aten.empty.memory_format, [1], dtype=torch.float32, device=_val(m.x).device)
            scale_inv = _emit(graph, aten.empty.memory_format, [1], dtype=torch.float32, device=_val(m.x).device)
        graph.call_function(torch.ops.schedx.cast_transpose_fp8_out.default, (m.source, m.scale),
                            {"rows": rows, "cols": cols, "amax": amax_out, "scale_inv": scale_inv,
                             **_divide_kwargs(m)})
        if amax is not None:
            new_amax = _emit(graph, aten.reshape.default, amax_out, [])
            if _val(amax).dtype != torch.float32:
                new_amax = _emit(graph, prims.convert_element_type.default, new_amax, _val(amax).dtype)
            amax.replace_all_uses_with(new_amax)
        f = _emit(graph, aten.permute.default, out, [1, 0]) if m.transposed and m.rows else out
    for n in [m.convert] + m.cols:
        n.replace_all_uses_with(f)


# ------------------------------------------------------------------ the int8 weight-only linear

@dataclasses.dataclass
class _W8:
    result: Node                 # the node whose value y replaces (the scale's mul or the bias add)
    x: Node                      # [M, K], unit last stride
    w: Node                      # int8 [N, K]
    scales: Node
    bias: Optional[Node]
    out_shape: Optional[list]    # the view of y to x's leading dimensions, where x was 3-D


def _unsqueezed(n: Any, dim: int) -> Optional[Node]:
    """a where n is a.unsqueeze(dim)."""
    return n.args[0] if _is(n, aten.unsqueeze.default) and n.args[1] == dim else None


def _widened(n: Any) -> Optional[Node]:
    """a where n is a.float()."""
    return n.args[0] if _is(n, prims.convert_element_type.default) and n.args[1] == torch.float32 else None


def _transposed_weight(p: Any, dtype: torch.dtype) -> Optional[Node]:
    """W where p is W.to(dtype).t() (gpt-fast) or W.t().to(dtype) (torchao's int8 tensor, traced)."""
    def t(n: Any) -> Optional[Node]:
        return n.args[0] if _is_transpose(n) else None

    def c(n: Any) -> Optional[Node]:
        return n.args[0] if _is(n, prims.convert_element_type.default) and n.args[1] == dtype else None
    return c(t(p)) if t(p) is not None else t(c(p))


def _unpadded_rows(r: Node) -> Optional[tuple[Node, Node]]:
    """(x, the mm's second operand) where r is mm(x padded with zero rows, .)[:M], M = x's rows:
    Inductor's pad_mm (CUDA, joint graph) writes that when its benchmark finds M's alignment
    pays, before the post-grad pass sees the graph. schedx takes any M, so it reads x itself."""
    if not (_is(r, aten.slice.Tensor) and _arg(r, 1, "dim", 0) == 0 and _arg(r, 2, "start", 0) in (0, None)
            and _arg(r, 4, "step", 1) == 1):
        return None
    mm = r.args[0]
    if not (_is(mm, aten.mm.default) and _single_user(mm)):
        return None
    padded, p = mm.args
    if not (_is(padded, aten.constant_pad_nd.default) and _single_user(padded) and _arg(padded, 2, "value", 0) == 0):
        return None
    pad = list(padded.args[1])
    x = padded.args[0]
    if len(pad) != 4 or pad[:3] != [0, 0, 0] or not _known(_val(r).shape[0] == _val(x).shape[0]):
        return None
    return x, p


def _product(r: Node) -> Optional[tuple[Node, Node, Node, Optional[list]]]:
    """(x, W, the product node, y's 3-D shape or None) where r is x @ W.to(x.dtype).t() as the
    post-grad graph spells it: mm, a view of mm (3-D x), mm of x padded to an aligned M, or the
    M = 1 form Inductor's mm decomposition writes under coordinate-descent tuning (which
    torchao's quantize_ turns on), fp32 (x[:, :, None] * Wt[None]).sum(1) rounded to x's dtype."""
    out_shape = None
    if _is(r, *_VIEWS) and _single_user(r.args[0]):
        r, out_shape = r.args[0], list(r.args[1])
    operands = tuple(r.args) if _is(r, aten.mm.default) else _unpadded_rows(r)
    if operands is not None:
        x, p = operands
        w = _transposed_weight(p, _val(x).dtype)
        return None if w is None else (x, w, r, out_shape)
    total = r.args[0] if _is(r, prims.convert_element_type.default) else None
    if _is(total, aten.sum.dim_IntList) and list(total.args[1]) == [1] and _is(total.args[0], aten.mul.Tensor) \
            and _single_user(total):
        a, b = total.args[0].args
        x, wt = _widened(_unsqueezed(a, 2)), _unsqueezed(b, 0)
        if x is None or wt is None or _val(x).dtype != r.args[1]:
            return None
        # int8 -> x's dtype -> fp32, or int8 -> fp32 where Inductor's pointless_convert folded the
        # chain (exact either way: every int8 value is a bf16 and an fp16 value)
        w = _transposed_weight(_widened(wt), _val(x).dtype) or _transposed_weight(wt, torch.float32)
        return None if w is None else (x, w, total, out_shape)
    return None


def _stored_scales(s: Node) -> Node:
    """The fp32 scales behind `s` where s is fp32 scales converted to x's dtype, perhaps viewed
    (torchao's scale.to(x.dtype).flatten()), read by nothing else; else s. schedx reads them as
    stored: one kernel less per call, and y rounded once where the eager program also rounds
    the scale and the product."""
    v = s
    while _is(v, *_VIEWS) and _single_user(v):
        v = v.args[0]
    if _is(v, prims.convert_element_type.default) and _single_user(v) and _val(v.args[0]).dtype == torch.float32:
        return v.args[0]
    return s


def _match_w8(mul: Node) -> Union[_W8, str, None]:
    if not _is(mul, aten.mul.Tensor) or not all(isinstance(a, Node) for a in mul.args):
        return None
    for r, s in (mul.args, mul.args[::-1]):
        found = _product(r)
        if found is not None:
            x, w, mm, out_shape = found
            break
    else:
        return None
    vx, vw, vs, vr = _val(x), _val(w), _val(s), _val(r)
    if vw is None or vw.dtype != torch.int8:
        return None
    if not _single_user(mm) or not _single_user(r):
        return "the unscaled product is used elsewhere"
    n, k = vw.shape
    if vs is None or vs.dtype not in W8_SCALE_DTYPES or not _known(vs.numel() == n) or vs.dim() > vr.dim() or \
            (vs.dim() and not _known(vs.shape[-1] == n)):
        return f"the scales are {None if vs is None else _describe(vs)}: schedx takes one bf16 or fp32 scale per row"
    if vx.dtype not in W8_X_DTYPES:
        return f"x is {vx.dtype}: schedx's int8 linear takes bf16 or fp16 x"
    if not all(_tensor_ok(v) and v.device == vx.device for v in (vx, vw, vs)):
        return "x, W and the scales are not on one CPU or CUDA device"
    if not _known(vx.stride(1) == 1) or not _known(vw.stride(1) == 1):
        return "x or W does not have a unit last stride: schedx would copy it first"
    s = _stored_scales(s)
    vs = _val(s)
    result, bias = mul, None
    add = next(iter(mul.users)) if _single_user(mul) else None
    other = [a for a in add.args if a is not mul] if _is(add, aten.add.Tensor) else []
    if len(other) == 1 and isinstance(other[0], Node):
        vb = _val(other[0])
        if vb.dtype == vs.dtype and vb.dim() == 1 and _known(vb.shape[0] == n) and vb.device == vx.device:
            result, bias = add, other[0]
    return _W8(result, x, w, s, bias, out_shape)


def _rewrite_w8(graph: Graph, m: _W8, report: GraphReport) -> None:
    """y = w8_linear(x, W, scales, bias) viewed as the replaced node (the scales' broadcast adds
    no dimension: _match_w8 checks it)."""
    vs = _val(m.scales)
    n = _val(m.w).shape[0]
    with graph.inserting_before(m.result):
        scales = m.scales if vs.dim() == 1 else _emit(graph, aten.reshape.default, m.scales, [n])
        y = _emit(graph, torch.ops.schedx.w8_linear.below_autograd, m.x, m.w, scales, m.bias)
        if m.out_shape is not None:
            y = _emit(graph, aten.reshape.default, y, m.out_shape)
        want = _val(m.result)
        if want.dtype != _val(y).dtype:  # fp32 scales promote the eager product to fp32
            y = _emit(graph, prims.convert_element_type.default, y, want.dtype)
    m.result.replace_all_uses_with(y)
    report.rewrites.append(Rewrite(Pattern.W8_LINEAR, m.result.name,
                                   f"x {_describe(_val(m.x))}, W {list(_val(m.w).shape)}, scales "
                                   f"{str(vs.dtype).removeprefix('torch.')}{', bias' if m.bias is not None else ''}"))


# ------------------------------------------------------------------ the int4pack linear

@dataclasses.dataclass
class _W4:
    mm: Node               # aten._weight_int4pack_mm(_for_cpu)(x, weight, group_size, scales_and_zeros)
    x: Node                # [M, K]
    weight: Node           # get_attr of a frozen constant
    scales_and_zeros: Node
    group_size: int


def _match_w4(mm: Node) -> Union[_W4, str, None]:
    if not _is(mm, *_INT4PACK_MM):
        return None
    x, weight, group_size, sz = (_arg(mm, i, name) for i, name in
                                 enumerate(("self", "mat2", "qGroupSize", "qScaleAndZeros")))
    vx, vsz = _val(x), _val(sz)
    if (vx.dtype, vsz.dtype) not in W4_DTYPES:
        return f"x is {vx.dtype} with {vsz.dtype} scales: schedx's int4 linear takes bf16 x, or fp16 x with fp16 scales"
    if group_size not in _int4.GROUP_SIZES:
        return f"group size {group_size}: schedx's int4 linear takes 32, 64 or 128"
    if not all(isinstance(a, Node) and a.op == "get_attr" for a in (weight, sz)):
        return ("the int4pack weight is a graph input: schedx repacks it once at compile time, which needs "
                "torch._inductor.config.freezing = True")
    if not _tensor_ok(vx, INT4PACK_DEVICES):
        return (f"x is {_describe(vx)}: the pass rewrites the int4pack linear on {', '.join(INT4PACK_DEVICES)} only "
                "(schedx.inductor.INT4PACK_DEVICES; on the CPU aten's kernel is as fast)")
    return _W4(mm, x, weight, sz, group_size)


def _constant(graph: Graph, name: str, value: torch.Tensor, like: Node) -> Node:
    """A get_attr node for `value`, set on the graph's module under a name of its own."""
    gm = graph.owning_module
    i = 0
    while hasattr(gm, f"{name}_{i}"):
        i += 1
    gm.register_buffer(f"{name}_{i}", value)
    node = graph.get_attr(f"{name}_{i}")
    mode = torch._guards.detect_fake_mode([_val(like)])
    node.meta["val"] = mode.from_tensor(value, static_shapes=True) if mode is not None else value
    return node


def _rewrite_w4(graph: Graph, m: _W4, report: GraphReport, repacked: dict) -> None:
    """y = w4_linear(x, the repacked constants); a constant used by several products is repacked once."""
    key = (m.weight.target, m.scales_and_zeros.target, m.group_size)
    gm = graph.owning_module
    with graph.inserting_before(m.mm):
        if key not in repacked:
            p = _int4.repack_int4pack(operator.attrgetter(m.weight.target)(gm),
                                      operator.attrgetter(m.scales_and_zeros.target)(gm),
                                      group_size=m.group_size, in_features=_val(m.x).shape[1])
            repacked[key] = (p.form, [None if t is None else _constant(graph, f"_schedx_w4_{part}", t, m.x)
                                      for part, t in (("w", p.w), ("scales", p.scales), ("zeros", p.zeros))])
        form, (w, scales, zeros) = repacked[key]
        y = _emit(graph, torch.ops.schedx.w4_linear.below_autograd, m.x, w, scales, zeros, None, m.group_size)
    m.mm.replace_all_uses_with(y)
    report.rewrites.append(Rewrite(Pattern.W4_LINEAR, m.mm.name,
                                   f"x {_describe(_val(m.x))}, W [{_val(w).shape[0]}, {_val(m.x).shape[1]}], "
                                   f"group {m.group_size}, {form.value}"))


# ------------------------------------------------------------------ the pass

def rewrite(graph: Graph) -> GraphReport:
    """Rewrites the seed patterns of `graph` in place into torch.ops.schedx calls."""
    report = GraphReport()
    order = {n: i for i, n in enumerate(graph.nodes)}
    patterns = ((Pattern.CAST_TRANSPOSE, _match_cast, functools.partial(_rewrite_cast, order=order)),
                (Pattern.W8_LINEAR, _match_w8, _rewrite_w8),
                (Pattern.W4_LINEAR, _match_w4, functools.partial(_rewrite_w4, repacked={})))
    for node in list(graph.nodes):
        for pattern, match, apply in patterns:
            m = match(node)
            if isinstance(m, str):
                report.skips.append(Skip(pattern, node.name, m))
            elif m is not None:
                apply(graph, m, report)
    if report.rewrites:
        graph.eliminate_dead_code()
    return report


@functools.lru_cache(1)
def _library_digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class SchedxGraphPass(CustomGraphPass):
    """The pass as Inductor's post_grad_custom_pre_pass, running `chained` (the pass the
    user had set, if any) after its own rewrite."""

    def __init__(self, chained: Optional[Callable[[Graph], None]] = None):
        self.chained = chained

    def __call__(self, graph: Graph) -> None:
        report = rewrite(graph)
        _reports.append(report)
        del _reports[:-_REPORTS_KEPT]
        for r in report.rewrites:
            log.info("schedx.inductor: %s at %s (%s)", r.pattern.value, r.node, r.detail)
        for s in report.skips:
            log.info("schedx.inductor: left %s at %s to Inductor: %s", s.pattern.value, s.node, s.reason)
        if self.chained is not None:
            self.chained(graph)

    def uuid(self) -> Optional[Any]:
        """Changes with this file, the Python side of the ops and of int4 repacking, libschedx's
        bytes and INT4PACK_DEVICES; None (no caching, as Inductor does for any pass without
        one) where the chained pass has none."""
        chained = None
        if self.chained is not None:
            chained = self.chained.uuid() if isinstance(self.chained, CustomGraphPass) else None
            if chained is None:
                return None
        own = get_hash_for_files((__file__, _ops.__file__, _int4.__file__),
                                 extra=_library_digest(_capi.lib()._name)).hex()
        return (own, tuple(INT4PACK_DEVICES), chained)


def is_enabled() -> bool:
    return isinstance(inductor_config.post_grad_custom_pre_pass, SchedxGraphPass)


def enable() -> None:
    """Installs the pass for every later torch.compile (a graph compiled before keeps its code)."""
    if not is_enabled():
        inductor_config.post_grad_custom_pre_pass = SchedxGraphPass(inductor_config.post_grad_custom_pre_pass)


def disable() -> None:
    """Removes the pass, restoring the one it chained to."""
    current = inductor_config.post_grad_custom_pre_pass
    if isinstance(current, SchedxGraphPass):
        inductor_config.post_grad_custom_pre_pass = current.chained
    elif any(isinstance(p, SchedxGraphPass) for p in _chain(current)):
        raise RuntimeError("schedx.inductor.disable: another pass was installed over schedx's; remove it first")


def _chain(p: Any) -> Iterator[Any]:
    while p is not None:
        yield p
        p = getattr(p, "chained", None)


@contextlib.contextmanager
def enabled() -> Iterator[None]:
    """The pass on inside the block (for the compiles that happen there), as it was after."""
    was = is_enabled()
    enable()
    try:
        yield
    finally:
        if not was:
            disable()
