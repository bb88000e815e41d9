"""Time the kernels the calibrated cost model describes, on the GPU at hand (issue 27 item 6).

    python benchmarks/measure_kernels.py --out measured_h100.json          # NVIDIA GPU + PyTorch
    python benchmarks/measure_kernels.py --dry-run --out /tmp/tiny.json    # any machine, tiny shapes, CPU

What is timed (each a median over repeats after warm-up, CUDA-synchronised):
- GEMMs C = A B^T in bf16, and in fp8 (e4m3, per-tensor scales) through torch._scaled_mm where the
  GPU has fp8 tensor cores. Shapes follow what cost/gemm.py's model depends on: M across every
  shipped profile's threadblock tile heights (tile quantisation, one row below and above each) and
  powers of two (wave quantisation, the plateau); (N, K) the projection shapes of Llama-3.1-8B
  (q, kv, o, gate/up, down, lm_head); and a K sweep at M = N = 4096 for `gemm_k_half`.
- Flash attention forward (torch.nn.functional.scaled_dot_product_attention), causal and not, at
  query = key lengths 128 ... 16k (`attn_prefill_efficiency`, `attn_prefill_half_seq`), Llama-3.1-8B
  heads (32 query, 8 KV, head dim 128).
- Attention decode: one query token over KV lengths 256 ... 32k, batch 1 ... 64
  (`attn_decode_hbm_efficiency`).
- One decode step of a Llama-3.1-8B built from llm_analysis/model_configs (transformers'
  LlamaConfig, random bf16 weights) at batch 1 ... 256 over a short context: the end-to-end check
  (eager transformers, no CUDA graphs: the kernel floor is the eager one).

Every row carries its FLOPs and bytes as the cost model counts them, so a fit divides by the GPU's
spec itself. The JSON starts with the environment (GPU name, driver, CUDA, torch, transformers);
benchmarks/distil_operator_data.py reads it (`--local`). On a GPU the whole run takes a few
minutes; `--dry-run` runs every section on the CPU with tiny shapes (what the test runs) and
leaves fp8 out with the reason.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SCHEMA = "llm_analysis.measure_kernels/1"
LLAMA_8B_CONFIG = REPO / "llm_analysis" / "model_configs" / "meta-llama_Llama-3.1-8B.json"


# ---------------------------------------------------------------- environment
def environment(torch, device: str, dry_run: bool) -> dict:
    env = {"device": device, "dry_run": dry_run, "torch": torch.__version__,
           "created_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "python": sys.version.split()[0]}
    try:
        import transformers
        env["transformers"] = transformers.__version__
    except ImportError:
        env["transformers"] = None
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(gpu_name=torch.cuda.get_device_name(0), cuda=torch.version.cuda,
                   compute_capability=f"{props.major}.{props.minor}", num_sms=props.multi_processor_count,
                   memory_bytes=props.total_memory, cudnn=torch.backends.cudnn.version(), driver=_driver_version())
    else:
        env.update(gpu_name=None, cuda=torch.version.cuda, driver=None)
    return env


def _driver_version():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


# ---------------------------------------------------------------- timing
def time_s(torch, fn, device: str, repeats: int, warmup: int) -> float:
    """Median seconds of one call of `fn` (CUDA events on a GPU, wall clock on the CPU)."""
    for _ in range(warmup):
        fn()
    times = []
    if device == "cuda":
        torch.cuda.synchronize()
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
    else:
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


# ---------------------------------------------------------------- shapes
def llama_8b() -> dict:
    return json.loads(LLAMA_8B_CONFIG.read_text())


def gemm_shapes(dry_run: bool) -> list[tuple[int, int, int]]:
    """(M, N, K) to time: see the module docstring."""
    if dry_run:
        return [(m, n, k) for m in (1, 16, 17) for n, k in ((32, 64), (64, 32))]
    from llm_analysis.cost.profiles import list_generations, load_profile
    heights = sorted({tm for gen in list_generations() for tm, _, _ in load_profile(gen).gemm_tile_shapes})
    ms = {1, 2, 4, 8}
    for tm in heights:
        ms |= {tm - 1, tm, tm + 1}
    ms |= {2 ** p for p in range(4, 15)}  # 16 ... 16384 tokens
    cfg = llama_8b()
    d, f, heads, kv = cfg["hidden_dim"], cfg["ffn_embed_dim"], cfg["n_head"], cfg["num_key_value_heads"]
    head_dim = d // heads
    nk = [(d, d), (2 * kv * head_dim, d), (2 * f, d), (d, f), (cfg["vocab_size"], d)]  # q/o, kv, gate+up, down, head
    shapes = [(m, n, k) for m in sorted(x for x in ms if x >= 1) for n, k in nk]
    shapes += [(4096, 4096, k) for k in (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)]
    return shapes


# ---------------------------------------------------------------- sections
def measure_gemms(torch, device, dry_run, repeats, warmup, skipped) -> list[dict]:
    rows = []
    fp8_ok = device == "cuda" and hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn") \
        and torch.cuda.get_device_capability(0) >= (8, 9)
    if not fp8_ok:
        skipped.append({"what": "fp8 GEMMs", "why": "needs a CUDA GPU with fp8 tensor cores (compute capability "
                        ">= 8.9) and torch._scaled_mm" + (" (dry run on the CPU)" if dry_run else "")})
    for m, n, k in gemm_shapes(dry_run):
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
        b = torch.randn(n, k, device=device, dtype=torch.bfloat16)
        t = time_s(torch, lambda: a @ b.t(), device, repeats, warmup)
        rows.append(_gemm_row("bf16", m, n, k, t, 2))
        if fp8_ok and m % 16 == 0 and n % 16 == 0 and k % 16 == 0:  # _scaled_mm's alignment
            a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
            one = torch.ones((), device=device, dtype=torch.float32)
            t8 = time_s(torch, lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one,
                                                        out_dtype=torch.bfloat16), device, repeats, warmup)
            rows.append(_gemm_row("fp8", m, n, k, t8, 1))
        del a, b
    return rows


def _gemm_row(dtype: str, m: int, n: int, k: int, t: float, operand_bytes: int) -> dict:
    flops = 2.0 * m * n * k
    nbytes = operand_bytes * (m * k + n * k) + 2 * m * n  # operands in, bf16 out
    return {"dtype": dtype, "m": m, "n": n, "k": k, "time_s": t, "flops": flops, "bytes": nbytes,
            "tflops_per_s": flops / t / 1e12}


def measure_prefill(torch, device, dry_run, repeats, warmup) -> list[dict]:
    import torch.nn.functional as F
    cfg = llama_8b()
    heads, kv = (4, 2) if dry_run else (cfg["n_head"], cfg["num_key_value_heads"])
    head_dim = 16 if dry_run else cfg["hidden_dim"] // cfg["n_head"]
    lengths = (16, 64) if dry_run else (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
    rows = []
    for s in lengths:
        batch = 1 if dry_run else max(1, 16384 // s)  # ~16k tokens per call: the GPU stays full
        q = torch.randn(batch, heads, s, head_dim, device=device, dtype=torch.bfloat16)
        k = torch.randn(batch, kv, s, head_dim, device=device, dtype=torch.bfloat16)
        v = torch.randn_like(k)
        for causal in (False, True):
            t = time_s(torch, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True),
                       device, repeats, warmup)
            # the FLOPs flash kernels compute: QK^T and PV over the whole matrix, half of it when causal
            full = 4.0 * batch * heads * s * s * head_dim
            flops = full * (s + 1) / (2 * s) if causal else full
            nbytes = 2 * (q.numel() * 2 + k.numel() + v.numel())  # q, o, k, v in bf16
            rows.append({"causal": causal, "batch": batch, "heads": heads, "kv_heads": kv, "head_dim": head_dim,
                         "seq_len": s, "time_s": t, "flops": flops, "bytes": nbytes,
                         "tflops_per_s": flops / t / 1e12})
        del q, k, v
    return rows


def measure_decode_attention(torch, device, dry_run, repeats, warmup) -> list[dict]:
    import torch.nn.functional as F
    cfg = llama_8b()
    heads, kv = (4, 2) if dry_run else (cfg["n_head"], cfg["num_key_value_heads"])
    head_dim = 16 if dry_run else cfg["hidden_dim"] // cfg["n_head"]
    grid = [(1, 32), (2, 64)] if dry_run else [(b, s) for b in (1, 8, 64) for s in (256, 1024, 4096, 16384, 32768)
                                               if b * s <= 64 * 16384]
    rows = []
    for batch, s in grid:
        q = torch.randn(batch, heads, 1, head_dim, device=device, dtype=torch.bfloat16)
        k = torch.randn(batch, kv, s, head_dim, device=device, dtype=torch.bfloat16)
        v = torch.randn_like(k)
        t = time_s(torch, lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), device, repeats, warmup)
        kv_bytes = 2 * (k.numel() + v.numel())
        rows.append({"batch": batch, "heads": heads, "kv_heads": kv, "head_dim": head_dim, "kv_len": s, "time_s": t,
                     "flops": 4.0 * batch * heads * s * head_dim, "kv_bytes": kv_bytes,
                     "gb_per_s": kv_bytes / t / 1e9})
        del q, k, v
    return rows


def llama_config(dry_run: bool):
    """transformers' LlamaConfig of Llama-3.1-8B from the catalogue file (tiny for a dry run)."""
    from transformers import LlamaConfig
    cfg = llama_8b()
    if dry_run:
        return LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, vocab_size=256, max_position_embeddings=512)
    return LlamaConfig(hidden_size=cfg["hidden_dim"], intermediate_size=cfg["ffn_embed_dim"],
                       num_hidden_layers=cfg["num_layers"], num_attention_heads=cfg["n_head"],
                       num_key_value_heads=cfg["num_key_value_heads"], vocab_size=cfg["vocab_size"],
                       max_position_embeddings=cfg["max_seq_len"], rope_scaling=cfg.get("rope_scaling"),
                       tie_word_embeddings=cfg["tie_word_embeddings"], rms_norm_eps=1e-5, rope_theta=500000.0)


def measure_decode_step(torch, device, dry_run, repeats, warmup, skipped) -> list[dict]:
    try:
        from transformers import DynamicCache, LlamaForCausalLM
    except ImportError as e:
        skipped.append({"what": "Llama-3.1-8B decode step", "why": f"transformers not importable: {e}"})
        return []
    config = llama_config(dry_run)
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    context = 16 if dry_run else 128
    rows = []
    for batch in ((1, 2) if dry_run else (1, 2, 4, 8, 16, 32, 64, 128, 256)):
        ids = torch.randint(0, config.vocab_size, (batch, context), device=device)
        with torch.no_grad():
            cache = DynamicCache()
            out = model(input_ids=ids, past_key_values=cache, use_cache=True)
            nxt = out.logits[:, -1:].argmax(-1)
            pos = torch.full((batch, 1), context, device=device, dtype=torch.long)

            def step():
                # one token against the prefilled cache; the cache is cropped back afterwards
                model(input_ids=nxt, past_key_values=cache, position_ids=pos, use_cache=True)
                cache.crop(-1)  # (a negative length removes that many tokens)
            t = time_s(torch, step, device, repeats, warmup)
        rows.append({"model": "meta-llama_Llama-3.1-8B" + (" (tiny: dry run)" if dry_run else ""),
                     "layers": config.num_hidden_layers, "hidden": config.hidden_size, "batch": batch,
                     "context_len": context, "framework": "transformers eager, no CUDA graphs", "time_s": t})
        del cache, out
    del model
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU (checks the script, times nothing "
                                                           "meaningful)")
    ap.add_argument("--repeats", type=int, default=None, help="timed calls per point (default 20; 2 dry)")
    ap.add_argument("--sections", default="gemm,prefill,decode_attention,decode_step",
                    help="comma-separated subset of gemm, prefill, decode_attention, decode_step")
    args = ap.parse_args(argv)
    import torch
    device = "cpu" if args.dry_run else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("measure_kernels: no CUDA GPU visible to PyTorch; use --dry-run to check the script on the CPU",
              file=sys.stderr)
        return 2
    repeats = args.repeats or (2 if args.dry_run else 20)
    warmup = 1 if args.dry_run else 5
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    valid = {"gemm", "prefill", "decode_attention", "decode_step"}
    if set(sections) - valid:
        print(f"measure_kernels: --sections {args.sections!r}; valid: {', '.join(sorted(valid))}", file=sys.stderr)
        return 2
    doc = {"schema": SCHEMA, "environment": environment(torch, device, args.dry_run), "skipped": []}
    t0 = time.perf_counter()
    if "gemm" in sections:
        doc["gemm"] = measure_gemms(torch, device, args.dry_run, repeats, warmup, doc["skipped"])
    if "prefill" in sections:
        doc["attention_prefill"] = measure_prefill(torch, device, args.dry_run, repeats, warmup)
    if "decode_attention" in sections:
        doc["attention_decode"] = measure_decode_attention(torch, device, args.dry_run, repeats, warmup)
    if "decode_step" in sections:
        doc["decode_step"] = measure_decode_step(torch, device, args.dry_run, max(3, repeats // 4), warmup,
                                                 doc["skipped"])
    doc["environment"]["wall_s"] = time.perf_counter() - t0
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    counts = ", ".join(f"{k} {len(v)}" for k, v in doc.items() if isinstance(v, list) and k != "skipped")
    print(f"measure_kernels: wrote {args.out} ({counts}; {doc['environment']['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
