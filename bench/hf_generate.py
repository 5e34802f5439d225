"""Hugging Face transformers' Llama decoding through generate() with a static cache, unchanged,
with int8 weights from torchao's Int8WeightOnlyConfig (what transformers' TorchAoConfig applies),
with and without schedx.inductor; bf16, and schedx.nn's modules holding torchao's int8 weights and
scales, beside them.

transformers compiles the decode step itself when the cache is static; the pass is enabled
around generate() for the '+pass' form. Per form and batch: microseconds per generated token
(the difference of two generate() lengths, so prefill and compile drop out), greedy tokens
compared with schedx.nn's, and a profiler summary of a few steps (host and GPU time).

Usage (GPU machine, repository root, build/ built, torchao on PYTHONPATH):
  SCHEDX_LIBRARY=build/runtime/libschedx.so python3 bench/hf_generate.py --layers 8 --batches 1,4,8 --out f.md
"""

import argparse
import contextlib
import copy
import os
import statistics
import sys
import tempfile
import time

# Compiled graphs from an earlier run's cache would run no pass (the rewrite count would read 0):
# a cache of this run's own.
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="hf-generate-")

import torch  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import schedx.inductor  # noqa: E402
import schedx.nn as snn  # noqa: E402
from compare_torch import environment, md_table, write_report  # noqa: E402

FORMS = ("bf16", "torchao", "torchao+pass", "schedx")


def llama(layers, device, tiny):
    from transformers import LlamaConfig, LlamaForCausalLM
    if tiny:  # the CPU smoke run's shapes
        cfg = LlamaConfig(hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=2,
                          vocab_size=1024, num_hidden_layers=layers)
    else:  # Llama-3-8B
        cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
                          vocab_size=128256, num_hidden_layers=layers, rope_theta=500000.0, max_position_embeddings=8192)
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    return model


def torchao_int8(base):
    from torchao.quantization import Int8WeightOnlyConfig, quantize_
    model = copy.deepcopy(base)
    quantize_(model, Int8WeightOnlyConfig())
    return model


def schedx_on_the_same_weights(quantized):
    """quantized's torchao int8 weights and scales in schedx.nn.Int8WeightOnlyLinear modules."""
    model = copy.deepcopy(quantized)
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is torch.nn.Linear and hasattr(child.weight, "qdata"):
                q = snn.Int8WeightOnlyLinear(child.in_features, child.out_features, bias=child.bias is not None,
                                             device=child.weight.device, dtype=torch.bfloat16)
                q.weight.copy_(child.weight.qdata)
                # bf16, as torchao's forward converts them (scale.to(y.dtype))
                q.scales = child.weight.scale.detach().reshape(-1).to(torch.bfloat16)
                if child.bias is not None:
                    q.bias.copy_(child.bias.detach())
                setattr(parent, name, q)
    return model


def generate(model, ids, new_tokens, with_pass):
    extra = {}
    if ids.device.type == "cpu":  # transformers compiles the step by itself only on accelerators
        from transformers import CompileConfig
        config = CompileConfig(mode="default")  # no CUDA graphs on the CPU
        config._compile_all_devices = True  # transformers' own switch for testing on the CPU
        extra["compile_config"] = config
    with torch.no_grad(), schedx.inductor.enabled() if with_pass else contextlib.nullcontext():
        return model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                              cache_implementation="static", pad_token_id=0, **extra)


def time_generate(model, ids, new_tokens, with_pass, rounds):
    ts = []
    for _ in range(rounds):
        sync()
        t0 = time.perf_counter()
        out = generate(model, ids, new_tokens, with_pass)
        sync()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), out


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def profile_steps(model, ids, with_pass):
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=acts) as prof:
        generate(model, ids, 8, with_pass)
        sync()
    sort = "self_device_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=sort, row_limit=12, max_name_column_width=60)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--batches", default="1,4,8")
    ap.add_argument("--forms", default=",".join(FORMS))
    ap.add_argument("--tokens", default="16,48", help="the two generate() lengths whose difference is timed")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tiny", action="store_true", help="small shapes on the CPU: a smoke run of this script")
    ap.add_argument("--out")
    ap.add_argument("--commit")
    args = ap.parse_args()
    device = "cpu" if args.tiny else "cuda"
    env = environment(args)
    import transformers
    env["transformers"] = transformers.__version__
    # Whether transformers' compiled step runs as CUDA graphs: its compile mode, and Inductor's
    # own count of graphs it would not capture (the reasons go to the log).
    env["transformers compile config"] = repr(vars(transformers.CompileConfig()))
    torch._logging.set_logs(cudagraphs=True)
    short, long = (int(t) for t in args.tokens.split(","))
    base = llama(args.layers, device, args.tiny)
    forms = args.forms.split(",")
    models = {"bf16": base, "torchao": torchao_int8(base)}
    models["schedx"] = schedx_on_the_same_weights(models["torchao"])
    rows, profiles = [], []

    def report():  # after each batch: a run stopped by its time limit keeps what it measured
        write_report(f"transformers Llama generate(), static cache, {args.layers} layers + head", env, [
            f"us per generated token = (time of generate({long}) - time of generate({short})) / {long - short}, "
            f"medians of {args.rounds}; greedy; the step compiled by transformers itself.", "",
            md_table(["batch", "form", "us per token", "tokens/s", "rewrites by the pass",
                      "CUDA graphs skipped (reasons in the log)"], rows), "",
            "Profiles (torch profiler, 8 tokens):", ""] + profiles, args.out)

    for batch in (int(b) for b in args.batches.split(",")):
        ids = torch.randint(1, base.config.vocab_size, (batch, 8), device=device)
        us, tokens = {}, {}
        for form in forms:
            with_pass = form.endswith("+pass")
            model = models[form.removesuffix("+pass")]
            torch._dynamo.reset()
            first = len(schedx.inductor.reports())
            skips_before = counters["inductor"]["cudagraph_skips"]
            generate(model, ids, long, with_pass)  # compiles
            t_short, _ = time_generate(model, ids, short, with_pass, args.rounds)
            t_long, out = time_generate(model, ids, long, with_pass, args.rounds)
            us[form] = (t_long - t_short) / (long - short) * 1e6
            tokens[form] = out
            fired = sum(len(r.rewrites) for r in schedx.inductor.reports()[first:])
            skips = counters["inductor"]["cudagraph_skips"] - skips_before
            rows.append([batch, form, f"{us[form]:.0f}", f"{batch * 1e6 / us[form]:.0f}", fired if with_pass else "", skips])
            print(rows[-1], flush=True)
        ref = tokens.get("schedx")
        for form in forms:
            if ref is not None and form != "schedx":
                same = (tokens[form] == ref).all(0)  # per position, over the batch
                first = int(same.logical_not().nonzero()[0]) - ids.shape[1] if not same.all() else None
                rows.append([batch, f"{form}: greedy tokens equal to schedx.nn's", "", "",
                             "all" if first is None else f"up to generated token {first}", ""])
        for num, den in (("bf16", "torchao+pass"), ("torchao", "torchao+pass"), ("schedx", "torchao+pass")):
            if num in us and den in us:
                rows.append([batch, f"{den} speed-up over {num}", f"{us[num] / us[den]:.2f}x", "", "", ""])
        report()
    # Profiled last: a profiling session can leave launches slower for the rest of the process.
    ids = torch.randint(1, base.config.vocab_size, (1, 8), device=device)
    for form in forms:
        torch._dynamo.reset()
        model, with_pass = models[form.removesuffix("+pass")], form.endswith("+pass")
        generate(model, ids, 8, with_pass)  # compiles
        profiles.append(f"batch 1, {form}, 8 tokens:\n\n```\n{profile_steps(model, ids, with_pass)}\n```\n")
        report()


if __name__ == "__main__":
    main()
