"""Group-wise int4 weights in schedx_w4_linear's layout: packing, quantizing, and repacking
GPTQ and AWQ checkpoints (exactly: the dequantized weights are equal before and after).

The layout (include/schedx/schedx.h, schedx_w4_linear):
  w       int32 [N, K/8]: word j of row n holds u[n, 8j + i] in bits 4i..4i+3, u in 0..15
  scales  [N, K/group_size] bf16 or fp16
  zeros   the same shape and dtype as scales (asymmetric form), or None (symmetric: z = 8)
and the weight of (n, k) is (u - z) * s of its group.

Checkpoint formats, as their writers pack them:
  GPTQ: qweight int32 [K/8, N], k = 8i + j in bits 4j of row i; qzeros int32 [K/g, ceil(N/8)],
        column n = 8c + j in bits 4j of column c; scales [K/g, N]; g_idx [K] (group of each k).
        Checkpoint format "gptq" (v1) stores z - 1, "gptq_v2" stores z. sym=True checkpoints
        have every z = 8.
  AWQ:  qweight int32 [K, N/8], nibble i of word c holds column 8c + AWQ_ORDER[i]; qzeros
        int32 [K/g, N/8] packed the same way (z stored as is); scales [K/g, N].
  int4pack (torch's tinygemm kernels, gpt-fast's int4 and torchao's tile_packed_to_4d / opaque
        int4): weight packed by aten._convert_weight_to_int4pack (CUDA) or its _for_cpu form, in a
        layout of each device's kernel; scales_and_zeros [K/g, N, 2] (s, zero); the weight is
        (u - 8) * s + zero, a float offset that schedx's (u - z) * s holds only approximately.
"""

import enum
from dataclasses import dataclass
from typing import Optional

import torch

__all__ = ["Int4Form", "GptqFormat", "PackedInt4", "GROUP_SIZES", "AWQ_ORDER", "pack_nibbles", "unpack_nibbles",
           "quantize", "dequantize", "repack_gptq", "repack_awq", "repack_int4pack", "int4pack_mm"]

GROUP_SIZES = (32, 64, 128)
# Column 8c + AWQ_ORDER[i] of an AWQ word sits in nibble i.
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
SYMMETRIC_ZERO = 8
_SCALE_DTYPES = (torch.bfloat16, torch.float16)


class Int4Form(str, enum.Enum):
    """SYMMETRIC: q * s, q = u - 8 in -8..7 (absmax rule: s = max|w| / 7).
    ASYMMETRIC: (u - z) * s with an integer zero point z in 0..15 per group (min-max rule,
    as AWQ quantizes: s = (max - min) / 15, z = clamp(round(-min / s), 0, 15))."""
    SYMMETRIC = "symmetric"
    ASYMMETRIC = "asymmetric"


class GptqFormat(str, enum.Enum):
    """GPTQ's checkpoint formats: V1 ("gptq") stores z - 1 in qzeros, V2 ("gptq_v2") z."""
    V1 = "gptq"
    V2 = "gptq_v2"


@dataclass
class PackedInt4:
    """What schedx_w4_linear takes: w [N, K/8] int32, scales [N, K/g], zeros (None: symmetric)."""
    w: torch.Tensor
    scales: torch.Tensor
    zeros: Optional[torch.Tensor]
    group_size: int

    @property
    def form(self) -> Int4Form:
        return Int4Form.SYMMETRIC if self.zeros is None else Int4Form.ASYMMETRIC


def _check_group_size(group_size: int, k: int):
    if group_size not in GROUP_SIZES:
        raise ValueError(f"group_size must be 32, 64 or 128, got {group_size}")
    if k % group_size != 0:
        raise ValueError(f"K ({k}) must be a multiple of group_size ({group_size})")


def _to_int32_bits(v: torch.Tensor) -> torch.Tensor:
    """int64 values in [0, 2^32) as the int32 of the same bits."""
    return torch.where(v >= 2 ** 31, v - 2 ** 32, v).to(torch.int32)


def _nibbles_of_words(words: torch.Tensor) -> torch.Tensor:
    """int32 [..., W] -> uint8 [..., W, 8]: nibble i (bits 4i..4i+3) of each word."""
    shifts = torch.arange(0, 32, 4, device=words.device, dtype=torch.int64)
    return ((words.to(torch.int64).unsqueeze(-1) & 0xFFFFFFFF) >> shifts & 0xF).to(torch.uint8)


def _words_of_nibbles(nibbles: torch.Tensor) -> torch.Tensor:
    """uint8 [..., W, 8] (values 0..15) -> int32 [..., W]: nibble i in bits 4i..4i+3."""
    shifts = torch.arange(0, 32, 4, device=nibbles.device, dtype=torch.int64)
    return _to_int32_bits((nibbles.to(torch.int64) << shifts).sum(-1))


def pack_nibbles(u: torch.Tensor) -> torch.Tensor:
    """u [N, K] of 0..15 (K a multiple of 8) -> the kernel's words [N, K/8] int32."""
    n, k = u.shape
    if k % 8 != 0:
        raise ValueError(f"K ({k}) must be a multiple of 8")
    if u.numel() and (int(u.min()) < 0 or int(u.max()) > 15):
        raise ValueError("nibbles must lie in 0..15")
    return _words_of_nibbles(u.reshape(n, k // 8, 8))


def unpack_nibbles(w: torch.Tensor) -> torch.Tensor:
    """The kernel's words [N, K/8] int32 -> u [N, K] uint8."""
    return _nibbles_of_words(w).reshape(w.shape[0], -1)


def dequantize(p: PackedInt4, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """[N, K] weights (u - z) * s, exact in float32 (the default) for integer z; in another
    dtype rounded once from that."""
    u = unpack_nibbles(p.w).float()
    g = p.group_size
    s = p.scales.float().repeat_interleave(g, dim=1)
    z = (p.zeros.float().repeat_interleave(g, dim=1) if p.zeros is not None
         else torch.full_like(u, float(SYMMETRIC_ZERO)))
    return ((u - z) * s).to(dtype)


def quantize(weight: torch.Tensor, group_size: int = 128, form: Int4Form = Int4Form.SYMMETRIC,
             scales_dtype: Optional[torch.dtype] = None) -> PackedInt4:
    """A [N, K] weight quantized per (row, group of group_size along K), in fp32 with the scale
    rounded to scales_dtype (the weight's dtype by default) before q is chosen:
    SYMMETRIC: s = max|w| / 7 (at least 1e-6), q = clamp(round(w / s), -8, 7), u = q + 8.
    ASYMMETRIC: s = (max - min) / 15 (at least 1e-6; max and min include 0), z = clamp(round(
    -min / s), 0, 15), u = clamp(round(w / s) + z, 0, 15)."""
    form = Int4Form(form)
    n, k = weight.shape
    _check_group_size(group_size, k)
    scales_dtype = scales_dtype or weight.dtype
    if scales_dtype not in _SCALE_DTYPES:
        raise ValueError(f"scales must be bf16 or fp16, got {scales_dtype}")
    w = weight.detach().float().reshape(n, k // group_size, group_size)
    zeros = None
    if form == Int4Form.SYMMETRIC:
        s = (w.abs().amax(-1) / 7).clamp(min=1e-6).to(scales_dtype)
        u = torch.clamp(torch.round(w / s.float().unsqueeze(-1)), -8, 7) + SYMMETRIC_ZERO
    else:
        hi, lo = w.amax(-1).clamp(min=0), w.amin(-1).clamp(max=0)
        s = ((hi - lo) / 15).clamp(min=1e-6).to(scales_dtype)
        z = torch.clamp(torch.round(-lo / s.float()), 0, 15)
        u = torch.clamp(torch.round(w / s.float().unsqueeze(-1)) + z.unsqueeze(-1), 0, 15)
        zeros = z.to(scales_dtype)
    return PackedInt4(pack_nibbles(u.reshape(n, k).to(torch.uint8)), s.contiguous(), zeros, group_size)


def _scales_of(scales: torch.Tensor, groups: int, n: int, fmt: str) -> torch.Tensor:
    if scales.dtype not in _SCALE_DTYPES:
        raise ValueError(f"{fmt} scales must be fp16 or bf16, got {scales.dtype}")
    if tuple(scales.shape) != (groups, n):
        raise ValueError(f"{fmt} scales must be [K/group_size, N] = [{groups}, {n}], got {tuple(scales.shape)}")
    return scales.t().contiguous()


def _form_of(z: torch.Tensor, sym: Optional[bool], fmt: str) -> bool:
    """Whether zero points z (integers) make the symmetric form: every z = 8."""
    all_eight = bool((z == SYMMETRIC_ZERO).all())
    if sym and not all_eight:
        raise ValueError(f"{fmt}: sym=True, but not every zero point is 8 (z from the checkpoint: "
                         f"{sorted(set(z.flatten().tolist()))[:8]}...)")
    return all_eight if sym is None else sym


def repack_gptq(qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor,
                g_idx: Optional[torch.Tensor] = None, *, group_size: int,
                checkpoint_format: GptqFormat = GptqFormat.V1, sym: Optional[bool] = None) -> PackedInt4:
    """A 4-bit GPTQ layer (see the module doc) in schedx's layout, exactly. g_idx, where given,
    must be the plain k // group_size (act-order checkpoints permute K and are refused). sym:
    None takes the symmetric form where every zero point is 8; True requires it; False keeps
    the zero points."""
    fmt = GptqFormat(checkpoint_format)
    if qweight.dtype != torch.int32 or qzeros.dtype != torch.int32:
        raise ValueError(f"GPTQ qweight and qzeros must be int32, got {qweight.dtype} and {qzeros.dtype}")
    k8, n = qweight.shape
    k = 8 * k8
    _check_group_size(group_size, k)
    groups = k // group_size
    if g_idx is not None:
        plain = torch.arange(k, device=g_idx.device) // group_size
        if tuple(g_idx.shape) != (k,) or not torch.equal(g_idx.to(torch.int64), plain):
            raise ValueError("GPTQ g_idx is not k // group_size: an act-order (desc_act=True) checkpoint, whose "
                             "permuted groups schedx_w4_linear does not take; quantize with desc_act=False")
    if tuple(qzeros.shape) != (groups, (n + 7) // 8):
        raise ValueError(f"GPTQ qzeros must be [K/group_size, ceil(N/8)] = [{groups}, {(n + 7) // 8}], "
                         f"got {tuple(qzeros.shape)}")
    s = _scales_of(scales, groups, n, "GPTQ")
    u = _nibbles_of_words(qweight).permute(1, 0, 2).reshape(n, k)   # [K/8, N, 8] -> [N, K]
    z = _nibbles_of_words(qzeros).reshape(groups, -1)[:, :n].t().to(torch.int64)
    if fmt == GptqFormat.V1:
        z = z + 1
    symmetric = _form_of(z, sym, "GPTQ")
    zeros = None if symmetric else z.to(s.dtype).contiguous()
    return PackedInt4(pack_nibbles(u), s, zeros, group_size)


def repack_awq(qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor, *, group_size: int) -> PackedInt4:
    """A 4-bit AWQ (GEMM layout) layer (see the module doc) in schedx's layout, exactly, with
    its zero points (asymmetric form)."""
    if qweight.dtype != torch.int32 or qzeros.dtype != torch.int32:
        raise ValueError(f"AWQ qweight and qzeros must be int32, got {qweight.dtype} and {qzeros.dtype}")
    k, n8 = qweight.shape
    n = 8 * n8
    _check_group_size(group_size, k)
    groups = k // group_size
    if tuple(qzeros.shape) != (groups, n8):
        raise ValueError(f"AWQ qzeros must be [K/group_size, N/8] = [{groups}, {n8}], got {tuple(qzeros.shape)}")
    s = _scales_of(scales, groups, n, "AWQ")
    # Nibble i of a word is column AWQ_ORDER[i] of its eight: put each back in its column.
    inverse = torch.tensor([AWQ_ORDER.index(j) for j in range(8)], device=qweight.device)
    u = _nibbles_of_words(qweight)[..., inverse].reshape(k, n).t()
    z = _nibbles_of_words(qzeros)[..., inverse].reshape(groups, n).t()
    return PackedInt4(pack_nibbles(u.contiguous()), s, z.to(s.dtype).contiguous(), group_size)


def int4pack_mm(device_type: str):
    """torch's int4pack (tinygemm) matmul for tensors on `device_type`: each device has its own
    packing and its own op."""
    aten = torch.ops.aten
    return aten._weight_int4pack_mm if device_type == "cuda" else aten._weight_int4pack_mm_for_cpu


# Rows of the identity read through the int4pack kernel at a time (bounds the [rows, N] result).
_INT4PACK_UNPACK_ROWS = 1024


def repack_int4pack(weight: torch.Tensor, scales_and_zeros: torch.Tensor, *, group_size: int,
                    in_features: int) -> PackedInt4:
    """A layer of torch's int4pack format (see the module doc) in schedx's layout, on the weight's
    device. The nibbles are read through torch's own kernel, the identity times the weight with
    s = 1 and zero = 0 (each output u - 8, exact), so whatever packing that kernel reads is read
    right. zero becomes z = 8 - zero / s rounded once to the scales' dtype: u and s are exact,
    and each weight moves by z's rounding times s, at most 2^-8 |z| s (bf16; 2^-11 for fp16).
    All zero 0 gives the symmetric form. A group with s = 0 and zero != 0 is refused."""
    k = in_features
    _check_group_size(group_size, k)
    sz = scales_and_zeros
    if sz.dim() != 3 or sz.shape[0] != k // group_size or sz.shape[2] != 2:
        raise ValueError(f"int4pack scales_and_zeros must be [K/group_size, N, 2] with K/group_size = {k // group_size},"
                         f" got {tuple(sz.shape)}")
    if sz.dtype not in _SCALE_DTYPES:
        raise ValueError(f"int4pack scales_and_zeros must be bf16 or fp16, got {sz.dtype}")
    n = sz.shape[1]
    unit = torch.zeros_like(sz)
    unit[..., 0] = 1
    mm = int4pack_mm(weight.device.type)
    u = torch.empty(n, k, dtype=torch.uint8, device=weight.device)
    with torch.no_grad():
        for k0 in range(0, k, _INT4PACK_UNPACK_ROWS):
            rows = min(_INT4PACK_UNPACK_ROWS, k - k0)
            eye = torch.zeros(rows, k, dtype=sz.dtype, device=weight.device)
            eye[:, k0:k0 + rows].fill_diagonal_(1)
            q = mm(eye, weight, group_size, unit).float()
            if q.shape != (rows, n) or not bool(((q >= -8) & (q <= 7) & (q == q.round())).all()):
                raise ValueError(f"weight is not an int4pack weight of [{n}, {k}] for this device's kernel")
            u[:, k0:k0 + rows] = (q + 8).t().to(torch.uint8)
    s, zero = sz[..., 0].t().contiguous(), sz[..., 1].t().double()
    if bool(((s == 0) & (zero != 0)).any()):
        raise ValueError("int4pack group with scale 0 and a nonzero zero: its weights (all the zero) are not "
                         "(u - z) * s for any z")
    z = torch.where(s == 0, 8.0, 8.0 - zero / torch.where(s == 0, 1.0, s.double()))
    zeros = None if bool((z == SYMMETRIC_ZERO).all()) else z.to(sz.dtype).contiguous()
    return PackedInt4(pack_nibbles(u), s, zeros, group_size)
