"""schedx.int4 (packing, quantizing, GPTQ and AWQ repacking), torch.ops.schedx.w4_linear and
schedx.nn.Int4WeightOnlyLinear, on the CPU and, where one is present, a CUDA device.

The checkpoints are built here from integer tensors by each format's packing as its writers
document it (GPTQ: K packed in qweight's rows, N in qzeros' columns, v1 zero points stored
minus one; AWQ: N packed with nibble i holding column AWQ_ORDER[i]); their dequantization is
written from the same definitions, independently of schedx.int4's unpacking. Forward results
are compared with x @ dequantize().T in fp64. Exits 77 (skipped) without torch.
"""

import os
import tempfile
import unittest
import unittest.mock
import warnings

os.environ["SCHEDX_TUNING_DB"] = os.path.join(tempfile.gettempdir(), f"schedx-test-{os.getpid()}", "none.jsonl")

try:
    import torch
except ImportError:
    torch = None

if torch is not None:
    from torch.library import opcheck

    import schedx
    import schedx.int4 as int4
    import schedx.nn as snn
    from schedx import SchedxError, Status

    DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    ops = torch.ops.schedx
    AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]


def needs_torch(cls):
    return unittest.skipIf(torch is None, "torch is not installed")(cls)


def words(nibbles):
    """int64 [..., 8] of 0..15 -> int32 [...]: nibble i in bits 4i (as the formats pack)."""
    v = sum(nibbles[..., i].to(torch.int64) << (4 * i) for i in range(8))
    return torch.where(v >= 2 ** 31, v - 2 ** 32, v).to(torch.int32)


def gptq_checkpoint(u, z, s, v1=True):
    """u [K, N], z [K/g, N] integers, s [K/g, N] -> (qweight [K/8, N], qzeros [K/g, ceil(N/8)], s)."""
    k, n = u.shape
    qweight = words(u.reshape(k // 8, 8, n).permute(0, 2, 1))
    stored = (z - 1 if v1 else z) & 0xF
    pad = (-n) % 8
    stored = torch.cat([stored, torch.zeros(stored.shape[0], pad, dtype=stored.dtype)], 1)
    qzeros = words(stored.reshape(stored.shape[0], -1, 8))
    return qweight, qzeros, s


def awq_checkpoint(u, z, s):
    """u [K, N], z [K/g, N] -> (qweight [K, N/8], qzeros [K/g, N/8], s) in AWQ's nibble order."""
    def pack(t):
        t = t.reshape(t.shape[0], -1, 8)
        return words(torch.stack([t[..., AWQ_ORDER[i]] for i in range(8)], -1))
    return pack(u), pack(z), s


def reference_weight(u, z, s, g):
    """[N, K] float64: (u - z) * s, the formats' own dequantization, from the integer tensors."""
    return ((u.double() - z.double().repeat_interleave(g, 0)) * s.double().repeat_interleave(g, 0)).t()


def random_layer(k, n, g, seed, zero_range=(0, 16), scales_dtype=None):
    gen = torch.Generator().manual_seed(seed)
    u = torch.randint(0, 16, (k, n), generator=gen)
    z = torch.randint(zero_range[0], zero_range[1] + 1, (k // g, n), generator=gen)
    s = (torch.rand(k // g, n, generator=gen) * 0.02 + 0.001).to(scales_dtype or torch.float16)
    return u, z, s


@needs_torch
class RepackTest(unittest.TestCase):
    """Repacking is exact: schedx's dequantized weights equal the checkpoint's, bit for bit."""

    SHAPES = ((128, 8, 128), (256, 40, 64), (256, 13, 32), (384, 3, 128), (64, 17, 64))  # K, N (ragged), g

    def test_gptq_v1_and_v2_with_zeros(self):
        for k, n, g in self.SHAPES:
            for v1 in (True, False):
                with self.subTest(k=k, n=n, g=g, v1=v1):
                    # v1 stores z - 1: z = 0 does not survive it, so v1 checkpoints hold 1..16.
                    u, z, s = random_layer(k, n, g, k + n + g, (1, 16) if v1 else (0, 15))
                    qw, qz, sc = gptq_checkpoint(u, z, s, v1)
                    fmt = int4.GptqFormat.V1 if v1 else int4.GptqFormat.V2
                    p = int4.repack_gptq(qw, qz, sc, torch.arange(k) // g, group_size=g, checkpoint_format=fmt)
                    self.assertEqual(p.form, int4.Int4Form.ASYMMETRIC)
                    self.assertEqual(tuple(p.w.shape), (n, k // 8))
                    self.assertTrue(torch.equal(int4.dequantize(p).double(), reference_weight(u, z, s, g)))

    def test_gptq_symmetric(self):
        for k, n, g in self.SHAPES:
            with self.subTest(k=k, n=n, g=g):
                u, _, s = random_layer(k, n, g, 7 * k + n)
                z = torch.full((k // g, n), 8)
                qw, qz, sc = gptq_checkpoint(u, z, s)
                p = int4.repack_gptq(qw, qz, sc, group_size=g)
                self.assertIsNone(p.zeros)
                self.assertTrue(torch.equal(int4.dequantize(p).double(), reference_weight(u, z, s, g)))
                # sym=False keeps the zero points; the weights are the same.
                p2 = int4.repack_gptq(qw, qz, sc, group_size=g, sym=False)
                self.assertTrue(torch.equal(int4.dequantize(p2), int4.dequantize(p)))

    def test_awq(self):
        for k, n, g in ((128, 8, 128), (256, 40, 64), (512, 64, 32), (64, 24, 64)):
            with self.subTest(k=k, n=n, g=g):
                u, z, s = random_layer(k, n, g, 3 * k + n, (0, 15))
                p = int4.repack_awq(*awq_checkpoint(u, z, s), group_size=g)
                self.assertTrue(torch.equal(int4.dequantize(p).double(), reference_weight(u, z, s, g)))

    def test_edge_groups_hold_their_own_scales(self):
        # K = one group, and the last group of K: a scale moved to another group would show.
        for k, g in ((32, 32), (64, 64), (128, 128), (256, 128)):
            u = torch.full((k, 8), 15)
            z = torch.zeros(k // g, 8, dtype=torch.int64)
            s = torch.arange(1, k // g * 8 + 1, dtype=torch.float16).reshape(k // g, 8)
            p = int4.repack_awq(*awq_checkpoint(u, z, s), group_size=g)
            self.assertTrue(torch.equal(int4.dequantize(p).double(), reference_weight(u, z, s, g)))

    def test_refusals(self):
        u, z, s = random_layer(256, 16, 64, 1, (1, 16))
        qw, qz, sc = gptq_checkpoint(u, z, s)
        act_order = torch.randperm(256, generator=torch.Generator().manual_seed(0)) // 64
        with self.assertRaisesRegex(ValueError, "act-order"):
            int4.repack_gptq(qw, qz, sc, act_order, group_size=64)
        with self.assertRaisesRegex(ValueError, "sym=True, but not every zero point is 8"):
            int4.repack_gptq(qw, qz, sc, group_size=64, sym=True)
        with self.assertRaisesRegex(ValueError, "group_size must be 32, 64 or 128"):
            int4.repack_gptq(qw, qz, sc, group_size=96)
        with self.assertRaisesRegex(ValueError, r"qzeros must be \[K/group_size, ceil\(N/8\)\]"):
            int4.repack_gptq(qw, qz, sc, group_size=32)
        with self.assertRaisesRegex(ValueError, "must be int32"):
            int4.repack_gptq(qw.to(torch.int64), qz, sc, group_size=64)
        with self.assertRaisesRegex(ValueError, "scales must be fp16 or bf16"):
            int4.repack_awq(*awq_checkpoint(u, z % 16, s)[:2], s.float(), group_size=64)
        with self.assertRaisesRegex(ValueError, "K \\(96\\) must be a multiple of group_size \\(64\\)"):
            int4.quantize(torch.randn(4, 96), 64)

    def test_pack_round_trip(self):
        u = torch.randint(0, 16, (5, 64), generator=torch.Generator().manual_seed(3)).to(torch.uint8)
        w = int4.pack_nibbles(u)
        self.assertEqual(w.dtype, torch.int32)
        self.assertTrue(torch.equal(int4.unpack_nibbles(w), u))
        # Bits: element 8j + i in nibble i of word j.
        self.assertEqual(int(w[0, 0]) & 0xF, int(u[0, 0]))
        self.assertEqual((int(w[0, 0]) >> 28) & 0xF, int(u[0, 7]))


def int4pack_layer(u, s, zero, device):
    """torch's int4pack tensors of nibbles u [N, K], s and zero [K/g, N], packed by the device's op."""
    if device == "cuda":  # inner k tiles of 16 elements: K a multiple of 16 times their number
        tiles = next(t for t in (8, 4, 2) if u.shape[1] % (16 * t) == 0)
        packed = torch.ops.aten._convert_weight_to_int4pack((u[:, ::2] << 4 | u[:, 1::2]).to(torch.uint8).to(device),
                                                            tiles)
    else:
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(u.to(torch.int32), 2)
    return packed, torch.stack([s, zero], -1).to(device)


@needs_torch
class Int4packTest(unittest.TestCase):
    """torch's int4pack (tinygemm) layers: nibbles and scales exact, zero points z = 8 - zero / s
    within half an ulp of bf16, the symmetric form where every zero is 0, refusals."""

    def test_repack(self):
        for device in DEVICES:
            for n, k, g in ((16, 32, 32), (48, 256, 64), (32, 2048, 128)):
                with self.subTest(device=device, n=n, k=k, g=g):
                    gen = torch.Generator().manual_seed(n * k + g)
                    u = torch.randint(0, 16, (n, k), generator=gen)
                    s = (torch.rand(k // g, n, generator=gen) / 64 + 1e-3).to(torch.bfloat16)
                    zero = ((8 - torch.rand(k // g, n, generator=gen) * 15) * s.float()).to(torch.bfloat16)
                    packed, sz = int4pack_layer(u, s, zero, device)
                    layer = snn.Int4WeightOnlyLinear.from_int4pack(packed, sz, group_size=g, in_features=k)
                    self.assertTrue(torch.equal(int4.unpack_nibbles(layer.weight).cpu().long(), u))
                    self.assertTrue(torch.equal(layer.scales.cpu(), s.t()))
                    want = (u.double() - 8) * s.double().repeat_interleave(g, 0).t() + \
                        zero.double().repeat_interleave(g, 0).t()
                    z = layer.zeros.double().cpu().repeat_interleave(g, 1)
                    moved = (layer.dequantize(torch.float64).cpu() - want).abs()
                    self.assertTrue(bool((moved <= 2 ** -8 * z.abs() * s.double().repeat_interleave(g, 0).t()).all()))
                    # the layer against torch's own kernel on the same tensors (both round y to bf16)
                    x = torch.randn(3, k, device=device).to(torch.bfloat16)
                    theirs = int4.int4pack_mm(device)(x, packed, g, sz).double().cpu()
                    ref = x.double().cpu() @ want.t()
                    for y in (layer(x).double().cpu(), theirs):
                        torch.testing.assert_close(y, ref, rtol=2 ** -7, atol=2 ** -7 * ref.abs().max().item())
                    zero0 = torch.zeros_like(zero)
                    sym = int4.repack_int4pack(*int4pack_layer(u, s, zero0, device), group_size=g, in_features=k)
                    self.assertIsNone(sym.zeros)
                    self.assertTrue(torch.equal(int4.dequantize(sym).cpu(), ((u - 8) * s.float().repeat_interleave(g, 0).t())))

    def test_refusals(self):
        u = torch.randint(0, 16, (16, 64))
        s = torch.full((2, 16), 0.5, dtype=torch.bfloat16)
        packed, sz = int4pack_layer(u, s, torch.zeros_like(s), "cpu")
        for kwargs, words in (({"group_size": 48, "in_features": 64}, "group_size"),
                              ({"group_size": 32, "in_features": 128}, "scales_and_zeros must be"),
                              ({"group_size": 64, "in_features": 64}, "scales_and_zeros must be")):
            with self.subTest(**kwargs), self.assertRaisesRegex(ValueError, words):
                int4.repack_int4pack(packed, sz, **kwargs)
        with self.assertRaisesRegex(ValueError, "bf16 or fp16"):
            int4.repack_int4pack(packed, sz.float(), group_size=32, in_features=64)
        bad = sz.clone()
        bad[1, 3] = torch.tensor([0.0, 0.25])
        with self.assertRaisesRegex(ValueError, "scale 0 and a nonzero zero"):
            int4.repack_int4pack(packed, bad, group_size=32, in_features=64)


def ref_forward(x, layer):
    """x @ dequantize().T (+ bias) in fp64."""
    y = x.double() @ layer.dequantize().double().t()
    return y if layer.bias is None else y + layer.bias.double()


@needs_torch
class W4LinearTest(unittest.TestCase):
    # bf16 output: half an ulp is 2^-9 of |y|; fp32 sums add K * 2^-24 of sum |terms|.
    REL = 2 ** -8

    def check(self, y, ref, x, layer, weight_rounded=False):
        """weight_rounded: the call may take a dequantize + GEMM path, whose weights are rounded to
        x's dtype (docs/w4_linear.md: 2^-8 of sum |terms| more for bf16)."""
        terms = x.double().abs() @ layer.dequantize().double().abs().t()
        bound = self.REL * ref.abs() + (1e-5 + (2 ** -8 if weight_rounded else 0)) * terms
        err = (y.double().cpu() - ref.cpu()).abs()
        self.assertTrue(bool((err <= bound.cpu()).all()), f"largest error {float(err.max())}")

    def test_every_cpu_variant_forced(self):
        names = [v for v in schedx.variants() if v.op == "w4_linear" and v.device == "cpu"]
        self.assertEqual(len(names), 10)
        for v in names:
            dtype = torch.bfloat16 if v.params["x_type"] == "bf16" else torch.float16
            sdtype = torch.bfloat16 if v.params["scale_type"] == "bf16" else torch.float16
            for symmetric in (True, False):
                for g in (32, 128):
                    with self.subTest(variant=v.name, symmetric=symmetric, g=g):
                        lin = torch.nn.Linear(256, 37, bias=not symmetric).to(sdtype)
                        layer = snn.Int4WeightOnlyLinear.from_linear(lin, g, symmetric)
                        x = (torch.randn(6, 256) * 2).to(dtype)
                        with schedx.forcing("w4_linear", v.name):
                            y = layer(x)
                        self.assertEqual(schedx.last_variant("w4_linear"), v.name)
                        self.assertEqual(y.dtype, dtype)
                        self.check(y, ref_forward(x, layer), x, layer)

    def test_cpu_torch_gemm(self):
        """From SCHEDX_CPU_GEMM_MIN_ROWS rows (by default 32 where the CPU has AVX512-BF16), a bf16
        CPU call is torch's GEMM on W dequantized to bf16 (each weight rounded once, as the CUDA
        dequantize + cuBLAS path), 8 MiB of bf16 W at a time, the bias added in fp32."""
        if schedx.ops.kernels != "c++":
            self.skipTest("the C++ kernels make this choice; these are the Python kernels")
        gen = torch.Generator().manual_seed(3)
        with unittest.mock.patch.dict(os.environ, {"SCHEDX_CPU_GEMM_MIN_ROWS": "4"}):
            for sdt in (torch.bfloat16, torch.float16):
                for zeros in (False, True):
                    u = torch.randint(0, 16, (40, 256), generator=gen, dtype=torch.int32)
                    sc = (torch.rand(40, 4, generator=gen) / 8).to(sdt)
                    z = torch.randint(0, 17, (40, 4), generator=gen).to(sdt) if zeros else None
                    b = torch.randn(40, generator=gen).to(sdt)
                    wd = int4.dequantize(int4.PackedInt4(int4.pack_nibbles(u), sc, z, 64), torch.bfloat16)
                    x = torch.randn(2, 3, 256, generator=gen).to(torch.bfloat16)
                    product = torch.nn.functional.linear(x, wd)
                    with self.subTest(scales=sdt, zeros=zeros):
                        w = int4.pack_nibbles(u)
                        self.assertTrue(torch.equal(ops.w4_linear(x, w, sc, z, None, 64), product))
                        self.assertEqual(schedx.last_variant("w4_linear"), "w4_linear_torch_gemm")
                        self.assertTrue(torch.equal(ops.w4_linear(x, w, sc, z, b, 64),
                                                    (product.float() + b.float()).to(torch.bfloat16)))
            # Past one chunk (K = 16384: 256 + 256 + 88 rows), within two roundings of fp64.
            u = torch.randint(0, 16, (600, 16384), generator=gen, dtype=torch.int32)
            sc = (torch.rand(600, 128, generator=gen) / 8).to(torch.bfloat16)
            z = torch.randint(0, 17, (600, 128), generator=gen).to(torch.bfloat16)
            packed = int4.PackedInt4(int4.pack_nibbles(u), sc, z, 128)
            wd = int4.dequantize(packed, torch.bfloat16).double()
            for m in (4, 33):
                x = torch.randn(m, 16384, generator=gen).to(torch.bfloat16)
                y = ops.w4_linear(x, packed.w, sc, z, None, 128)
                ref, terms = x.double() @ wd.t(), x.double().abs() @ wd.abs().t()
                with self.subTest(chunks=3, m=m):
                    self.assertLessEqual(((y.double() - ref).abs() / terms).max().item(), 2 ** -8)
            # A forced variant keeps the call on schedx's kernels, as schedx.forcing promises.
            x = torch.randn(16, 16384, generator=gen).to(torch.bfloat16)
            with schedx.forcing("w4_linear", "w4_linear_bf16_sbf16_cpu_b4_r2"):
                y = ops.w4_linear(x, packed.w, sc, z, None, 128)
                self.assertEqual(schedx.last_variant("w4_linear"), "w4_linear_bf16_sbf16_cpu_b4_r2")
            wx = int4.dequantize(packed, torch.float64)
            ref, terms = x.double() @ wx.t(), x.double().abs() @ wx.abs().t()
            self.assertTrue(bool(((y.double() - ref).abs() <= self.REL * ref.abs() + 1e-5 * terms).all()))
        with unittest.mock.patch.dict(os.environ, {"SCHEDX_CPU_GEMM_MIN_ROWS": "0"}):
            with self.assertRaisesRegex(RuntimeError, "schedx ERR_BAD_SIZE: SCHEDX_CPU_GEMM_MIN_ROWS must be a row count"):
                ops.w4_linear(torch.ones(4, 64, dtype=torch.bfloat16), torch.zeros(8, 8, dtype=torch.int32),
                              torch.ones(8, 2, dtype=torch.bfloat16), None, None, 32)

    def test_gptq_and_awq_layers_forward(self):
        for device in DEVICES:
            for fmt in ("gptq", "awq"):
                with self.subTest(device=device, fmt=fmt):
                    u, z, s = random_layer(512, 48, 128, 11, (0, 15))
                    bias = torch.randn(48).to(torch.float16)
                    if fmt == "gptq":
                        layer = snn.Int4WeightOnlyLinear.from_gptq(*gptq_checkpoint(u, z, s, v1=False), bias=bias,
                                                                   group_size=128, checkpoint_format="gptq_v2")
                    else:
                        layer = snn.Int4WeightOnlyLinear.from_awq(*awq_checkpoint(u, z, s), bias=bias, group_size=128)
                    layer = layer.to(device)
                    x = torch.randn(3, 5, 512, device=device).to(torch.bfloat16)
                    y = layer(x)
                    self.assertEqual(tuple(y.shape), (3, 5, 48))
                    # 15 rows of bf16: torch's GEMM on bf16 weights on a CPU with AVX512-BF16.
                    self.check(y.reshape(15, 48), ref_forward(x.reshape(15, 512), layer), x.reshape(15, 512), layer,
                               weight_rounded=True)

    def test_quantization_rules(self):
        w = torch.randn(16, 256) * 0.05
        for symmetric in (True, False):
            lin = torch.nn.Linear(256, 16, bias=False).to(torch.bfloat16)
            lin.weight.data.copy_(w)
            layer = snn.Int4WeightOnlyLinear.from_linear(lin, 64, symmetric)
            deq = layer.dequantize()
            # Within half a step of each group's scale; asymmetric, a step (the zero point's own
            # rounding can push the group's end against the clamp at 0 or 15).
            step = layer.scales.float().repeat_interleave(64, 1) * (0.5 if symmetric else 1.0)
            err = (deq - lin.weight.detach().float()).abs()
            self.assertTrue(bool((err <= step * (1 + 2 ** -7)).all()), f"{float((err / step).max())} steps")
            self.assertEqual(layer.zeros is None, symmetric)

    def test_empty_inputs(self):
        lin = torch.nn.Linear(64, 8).to(torch.bfloat16)
        layer = snn.Int4WeightOnlyLinear.from_linear(lin, 32)
        self.assertEqual(tuple(layer(torch.empty(0, 64, dtype=torch.bfloat16)).shape), (0, 8))
        w0 = torch.empty(0, 8, dtype=torch.int32)
        s0 = torch.empty(0, 2, dtype=torch.bfloat16)
        self.assertEqual(tuple(ops.w4_linear(torch.ones(3, 64, dtype=torch.bfloat16), w0, s0, None, None, 32).shape),
                         (3, 0))

    def test_bad_input_raises_clearly(self):
        x = torch.randn(2, 64).to(torch.bfloat16)
        w = torch.zeros(8, 8, dtype=torch.int32)
        s = torch.ones(8, 2, dtype=torch.bfloat16)
        cases = [
            ((x, w, s, None, None, 48), Status.ERR_BAD_SIZE, "group_size must be 32, 64 or 128"),
            ((x[:, :32], w[:, :4], s, None, None, 32), Status.ERR_BAD_SIZE, "scales must have shape"),
            ((x[:, :48], w[:, :6], s, None, None, 32), Status.ERR_BAD_SIZE, "must be a multiple of group_size"),
            ((x, w[:, :7], s, None, None, 32), Status.ERR_BAD_SIZE, "w must be int32"),
            ((x.float(), w, s, None, None, 32), Status.ERR_UNSUPPORTED_DTYPE, "x must be bf16 or fp16"),
            ((x, w.to(torch.int64), s, None, None, 32), Status.ERR_UNSUPPORTED_DTYPE, "w must be int32"),
            ((x, w, s.float(), None, None, 32), Status.ERR_UNSUPPORTED_DTYPE, "scales must be bf16 or fp16"),
            ((x, w, s, s.half(), None, 32), Status.ERR_UNSUPPORTED_DTYPE, "zeros must have scales' dtype"),
            ((x, w, s, s[:4], None, 32), Status.ERR_BAD_SIZE, "zeros must have shape"),
            ((x, w, s, None, s[:, 0].clone()[:3], 32), Status.ERR_BAD_SIZE, "bias must have shape"),
            ((x, w, s.to("meta"), None, None, 32), Status.ERR_POINTER_DEVICE, "scales: Tensor on device meta"),
        ]
        # A SchedxError from the Python kernel (which carries the status), a RuntimeError from
        # the C++ one: both read "schedx <status>: <message>".
        for args, status, message in cases:
            with self.subTest(message=message, kernels=schedx.ops.kernels):
                with self.assertRaisesRegex(RuntimeError, f"schedx {status.name}: .*{message}") as e:
                    ops.w4_linear(*args)
                if isinstance(e.exception, SchedxError):
                    self.assertEqual(e.exception.status, status)
        with self.assertRaisesRegex(ValueError, "group_size must be 32, 64 or 128"):
            snn.Int4WeightOnlyLinear.from_linear(torch.nn.Linear(64, 8).to(torch.bfloat16), 16)
        with self.assertRaisesRegex(RuntimeError, "has no derivative"):
            ops.w4_linear(x.requires_grad_(), w, s, None, None, 32)

    def test_opcheck_and_compile(self):
        for device in DEVICES:
            lin = torch.nn.Linear(128, 24).to(torch.bfloat16)
            layer = snn.Int4WeightOnlyLinear.from_linear(lin, 64, symmetric=False).to(device)
            x = torch.randn(5, 128, device=device).to(torch.bfloat16)
            with self.subTest(device=device):
                opcheck(ops.w4_linear.default, (x, layer.weight, layer.scales, layer.zeros, layer.bias, 64))
                opcheck(ops.w4_linear.default, (x.reshape(5, 1, 128), layer.weight, layer.scales, None, None, 64))
                compiled = torch.compile(layer, fullgraph=True)
                self.assertTrue(torch.equal(compiled(x), layer(x)))


@needs_torch
class ConvertTest(unittest.TestCase):
    def test_convert_all_or_nothing_with_filter_and_warnings(self):
        model = torch.nn.Sequential(torch.nn.Linear(128, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32),
                                    torch.nn.Linear(32, 16)).to(torch.bfloat16)
        model[3] = model[3].float()  # fp32: stays, with a warning
        x = torch.randn(2, 128).to(torch.bfloat16)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            snn.convert_to_int4_weight_only(model, 64, module_filter_fn=lambda mod, fqn: fqn != "2")
        self.assertIs(type(model[0]), snn.Int4WeightOnlyLinear)
        self.assertIs(type(model[2]), torch.nn.Linear)  # filtered out
        self.assertIs(type(model[3]), torch.nn.Linear)
        self.assertTrue(any("3 stays torch.nn.Linear" in str(w.message) for w in caught))
        self.assertEqual(tuple(model[0](x).shape), (2, 64))
        # in_features off the group: that linear stays, with a warning.
        odd = torch.nn.Sequential(torch.nn.Linear(96, 8)).to(torch.bfloat16)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            snn.convert_to_int4_weight_only(odd, 64)
        self.assertIs(type(odd[0]), torch.nn.Linear)
        self.assertTrue(any("not a multiple of group_size" in str(w.message) for w in caught))
        # A failure part way (the second linear's weight on the meta device cannot be
        # quantized) leaves the model as it was.
        model = torch.nn.Sequential(torch.nn.Linear(64, 8), torch.nn.Linear(64, 8, device="meta")).to(torch.bfloat16)
        with self.assertRaises((RuntimeError, NotImplementedError)):
            snn.convert_to_int4_weight_only(model, 64)
        self.assertIs(type(model[0]), torch.nn.Linear)

if __name__ == "__main__":
    if torch is None:
        print("torch is not installed: skipping the int4 weight-only tests")
        raise SystemExit(77)
    unittest.main()
