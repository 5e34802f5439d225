"""Token decode of a Llama-3-8B-shaped decoder with int8 weight-only linears, as gpt-fast runs it.

One process, one GPU: random weights, static KV cache, greedy decode of one token per
step under torch.compile(mode="reduce-overhead", fullgraph=True) with inductor's
coordinate-descent tuning (gpt-fast's generate.py settings), for each weight form:
  bf16       torch.nn.Linear
  gpt-fast   gpt-fast's WeightOnlyInt8Linear formulation: F.linear(x, W.to(x.dtype)) * scales
  schedx     schedx.nn.Int8WeightOnlyLinear (torch.ops.schedx.w8_linear)
  torchao    torchao's Int8WeightOnlyConfig (quantize_) over the bf16 model
  schedx-int4   schedx.nn.Int4WeightOnlyLinear, symmetric, group 128 (torch.ops.schedx.w4_linear)
  torchao-int4  torchao's Int4WeightOnlyConfig(group_size=128), tinygemm's packing (tile_packed_to_4d)
  <form>+pass  that form's model, unchanged, compiled with schedx.inductor enabled
Every nn.Linear is converted, the output head included (as gpt-fast's int8 handler does).
(The int4 forms quantize the weights themselves: the same bf16 weights, different rounding.)
Reports tokens/s per batch size and the weight bytes read per second against a read of
the same number of bytes (torch.amax over a buffer of that size) in the same process.

Usage (GPU machine, repository root, build/ built):
  SCHEDX_LIBRARY=build/runtime/libschedx.so python3 bench/llama_decode.py --layers 4 --batches 1,2,4,8 --out f.md
"""

import argparse
import contextlib
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import schedx.inductor  # noqa: E402
import schedx.nn as snn  # noqa: E402
from compare_torch import environment, md_table, write_report  # noqa: E402


INT4_GROUP = 128  # issue 50's decode target: group 128


class Config:
    dim, n_heads, n_kv_heads, head_dim, hidden, vocab = 4096, 32, 8, 128, 14336, 128256
    rope_base, norm_eps = 500000.0, 1e-5


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps, self.weight = eps, torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rope(x, freqs):
    """x [B, S, H, D] rotated by freqs [S, D/2, 2] (cos, sin) on consecutive pairs."""
    xs = x.float().reshape(*x.shape[:-1], -1, 2)
    f = freqs.view(1, xs.size(1), 1, xs.size(3), 2)
    out = torch.stack([xs[..., 0] * f[..., 0] - xs[..., 1] * f[..., 1],
                       xs[..., 1] * f[..., 0] + xs[..., 0] * f[..., 1]], -1)
    return out.flatten(3).type_as(x)


class Block(torch.nn.Module):
    def __init__(self, c, batch, max_seq):
        super().__init__()
        self.c = c
        kv = c.n_kv_heads * c.head_dim
        self.wqkv = torch.nn.Linear(c.dim, c.dim + 2 * kv, bias=False)
        self.wo = torch.nn.Linear(c.dim, c.dim, bias=False)
        self.w1 = torch.nn.Linear(c.dim, c.hidden, bias=False)
        self.w3 = torch.nn.Linear(c.dim, c.hidden, bias=False)
        self.w2 = torch.nn.Linear(c.hidden, c.dim, bias=False)
        self.attention_norm, self.ffn_norm = RMSNorm(c.dim, c.norm_eps), RMSNorm(c.dim, c.norm_eps)
        shape = (batch, c.n_kv_heads, max_seq, c.head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=torch.bfloat16))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=torch.bfloat16))

    def forward(self, x, freqs, mask, pos):
        c = self.c
        b, s, _ = x.shape
        kv = c.n_kv_heads * c.head_dim
        q, k, v = self.wqkv(self.attention_norm(x)).split([c.dim, kv, kv], dim=-1)
        q = rope(q.view(b, s, c.n_heads, c.head_dim), freqs).transpose(1, 2)
        k = rope(k.view(b, s, c.n_kv_heads, c.head_dim), freqs).transpose(1, 2)
        v = v.view(b, s, c.n_kv_heads, c.head_dim).transpose(1, 2)
        self.k_cache[:, :, pos] = k
        self.v_cache[:, :, pos] = v
        y = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask, enable_gqa=True)
        h = x + self.wo(y.transpose(1, 2).reshape(b, s, c.dim))
        n = self.ffn_norm(h)
        return h + self.w2(F.silu(self.w1(n)) * self.w3(n))


class Decoder(torch.nn.Module):
    def __init__(self, c, layers, batch, max_seq):
        super().__init__()
        self.tok_embeddings = torch.nn.Embedding(c.vocab, c.dim)
        self.layers = torch.nn.ModuleList(Block(c, batch, max_seq) for _ in range(layers))
        self.norm = RMSNorm(c.dim, c.norm_eps)
        self.output = torch.nn.Linear(c.dim, c.vocab, bias=False)
        inv = 1.0 / (c.rope_base ** (torch.arange(0, c.head_dim, 2).float() / c.head_dim))
        ang = torch.outer(torch.arange(max_seq).float(), inv)
        self.register_buffer("freqs", torch.stack([ang.cos(), ang.sin()], -1).to(torch.bfloat16))
        self.register_buffer("causal", torch.tril(torch.ones(max_seq, max_seq, dtype=torch.bool)))

    def forward(self, tokens, pos):
        mask = self.causal[None, None, pos]
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x, self.freqs[pos], mask, pos)
        return self.output(self.norm(x))


class GptFastInt8Linear(torch.nn.Module):
    """gpt-fast's WeightOnlyInt8Linear forward, over the same int8 weights and scales."""

    def __init__(self, q):
        super().__init__()
        self.register_buffer("weight", q.weight)
        self.register_buffer("scales", q.scales)

    def forward(self, x):
        return F.linear(x, self.weight.to(dtype=x.dtype)) * self.scales


def weight_bytes(model):
    # torchao's Int8Tensor reports its outer dtype (bf16): count the int8 data it holds
    def stored(t):
        t = getattr(t, "qdata", t)
        return t.numel() * t.element_size()
    return sum(stored(b) for n, b in model.named_buffers() if n.endswith("weight")) + sum(
        stored(p) for n, p in model.named_parameters()
        if n.endswith("weight") and "norm" not in n and "embeddings" not in n)


def read_time_us(nbytes):
    """One read of nbytes (a max over a float32 buffer), median of 20 after warm-up."""
    buf = torch.randn(nbytes // 4, device="cuda")
    for _ in range(3):
        buf.amax()
    ts = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        buf.amax()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3)
    del buf
    return statistics.median(ts)


def decode_rate(model, batch, steps, profile=False):
    """(steps per second, compile seconds, the profiled step's kernel table or None)."""
    # The greedy pick compiled with the model, as gpt-fast compiles sampling into decode_one_token
    # (and clones the token it feeds back): eager, the argmax over 128256 logits ran as a reduce
    # kernel of 36.5 us per step on an H100 (llama_decode_int4_2026-12-07_h100_6e035bb.md).
    step = torch.compile(lambda t, p: model(t, p).argmax(-1), mode="reduce-overhead", fullgraph=True)
    tokens = torch.randint(0, Config.vocab, (batch, 1), device="cuda")
    # The position stays on the device and advances in place, as in gpt-fast's generate.py:
    # a new host tensor per step would be a synchronising copy.
    pos = torch.zeros(1, dtype=torch.long, device="cuda")
    t_compile = time.perf_counter()
    with torch.no_grad():
        for _ in range(3):  # compile, record the graph, replay
            tokens = step(tokens, pos).clone()
            pos += 1
        torch.cuda.synchronize()
        t_compile = time.perf_counter() - t_compile
        rates = []
        for _ in range(3):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(steps):
                tokens = step(tokens, pos).clone()
                pos += 1
            torch.cuda.synchronize()
            rates.append(steps / (time.perf_counter() - t0))
        table = None
        if profile:
            from torch.profiler import ProfilerActivity, profile as prof_ctx
            with prof_ctx(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    tokens = step(tokens, pos).clone()
                    pos += 1
                torch.cuda.synchronize()
            table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=12, max_name_column_width=70)
    return statistics.median(rates), t_compile, table


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batches", default="1,2,4,8")
    ap.add_argument("--forms", default="bf16,gpt-fast,schedx")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--out")
    ap.add_argument("--commit")
    args = ap.parse_args()
    torch._inductor.config.coordinate_descent_tuning = True
    torch._inductor.config.triton.unique_kernel_names = True
    torch._inductor.config.fx_graph_cache = True
    torch._dynamo.config.cache_size_limit = 1024
    env = environment(args)
    c = Config()
    max_seq = 3 + 3 * args.steps + 8
    rows, profiles = [], []
    batches = [int(b) for b in args.batches.split(",")]
    forms = args.forms.split(",")
    for batch in batches:
        torch.manual_seed(0)
        with torch.device("cuda"):
            base = Decoder(c, args.layers, batch, max_seq).to(torch.bfloat16)
        for p in base.parameters():
            p.requires_grad_(False)
        models = {"bf16": base}
        if any(f.startswith("torchao") for f in forms):
            import copy

            from torchao.quantization import Int4WeightOnlyConfig, Int8WeightOnlyConfig, quantize_
            models["torchao"] = copy.deepcopy(base)
            quantize_(models["torchao"], Int8WeightOnlyConfig())
            if "torchao-int4" in forms:
                models["torchao-int4"] = copy.deepcopy(base)
                quantize_(models["torchao-int4"],
                          Int4WeightOnlyConfig(group_size=INT4_GROUP, int4_packing_format="tile_packed_to_4d"))
        if "schedx-int4" in forms:
            import copy
            models["schedx-int4"] = snn.convert_to_int4_weight_only(copy.deepcopy(base), INT4_GROUP)
        if any(f.split("+")[0] in ("gpt-fast", "schedx") for f in forms):
            import copy
            q8 = copy.deepcopy(base)
            snn.convert_to_int8_weight_only(q8)
            models["schedx"] = q8
            g8 = copy.deepcopy(q8)
            for parent in g8.modules():
                for name, child in list(parent.named_children()):
                    if isinstance(child, snn.Int8WeightOnlyLinear):
                        setattr(parent, name, GptFastInt8Linear(child))
            models["gpt-fast"] = g8
        read_cache = {}
        res = {}
        for form in forms:
            model = models[form.removesuffix("+pass")]
            nbytes = weight_bytes(model)
            if nbytes not in read_cache:
                read_cache[nbytes] = read_time_us(nbytes)
            torch._dynamo.reset()
            with schedx.inductor.enabled() if form.endswith("+pass") else contextlib.nullcontext():
                rate, t_compile, table = decode_rate(model, batch, args.steps, profile=batch == batches[0])
            if table:
                profiles.append(f"batch {batch}, {form}, 5 steps:\n\n```\n{table}\n```\n")
            res[form] = rate
            step_us = 1e6 / rate
            rows.append([batch, form, f"{rate * batch:.1f}", f"{rate:.1f}", f"{step_us:.0f}", f"{nbytes / 2**30:.2f}",
                         f"{nbytes / step_us / 1e3:.0f}", f"{100 * read_cache[nbytes] / step_us:.0f}%",
                         f"{t_compile:.0f}"])
            print(rows[-1], flush=True)
        for num, den in (("schedx", "gpt-fast"), ("gpt-fast+pass", "schedx"), ("torchao+pass", "schedx"),
                         ("torchao+pass", "torchao"), ("schedx", "bf16"), ("schedx-int4", "schedx"),
                         ("schedx-int4", "torchao-int4")):
            if num in res and den in res:
                rows.append([batch, f"{num} / {den}", "", f"{res[num] / res[den]:.2f}x", "", "", "", "", ""])
        del models, base
        torch.cuda.empty_cache()
    table = md_table(["batch", "weights", "tokens/s", "steps/s", "us per step", "weight GiB", "weight GB/s",
                      "same-size read time / step time", "compile s"], rows)
    write_report(f"Decode, Llama-3-8B-shaped, {args.layers} layers + output head", env, [
        "Greedy decode from position 0 (short context: the KV cache read is small), one token per step per "
        "sequence, torch.compile(mode='reduce-overhead', fullgraph=True) with coordinate-descent tuning; "
        f"medians of 3 rounds of {args.steps} steps, host loop included.", "", table, "",
        "GPU kernels of the first batch size (torch profiler):", ""] + profiles, args.out)

if __name__ == "__main__":
    main()
