"""What the public API returns for 200+ setups, to check that a restructuring changes no number.

Setups: every model of a grid (dense, GQA, MoE, MLA, sliding windows, Hub-imported encoder-decoder,
Mamba-2 and Jamba mixers) x GPU x layout (tp / pp / dp / ep / cp) x both perf models x dtype
(16-bit, weight-only int8, fp8), each with a few inference() and training() calls (ZeRO 0-3,
recomputation), plus plan_inference / plan_training runs. Errors are recorded too (their text must
not change either). Numbers are compared at a relative tolerance (default 1e-12).

    python benchmarks/api_snapshot.py before.json.gz
    python benchmarks/api_snapshot.py after.json.gz
    python benchmarks/api_snapshot.py --compare before.json.gz after.json.gz [rel]
"""
import ast
import gzip
import itertools
import json
import logging
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
logging.disable(logging.CRITICAL)

from llm_analysis.analysis import LLMAnalysis  # noqa: E402
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name,  # noqa: E402
                                 get_gpu_config_by_name, get_model_config_by_name)
from llm_analysis.planner import plan_inference, plan_training  # noqa: E402


def hub(d, name):
    """A ModelConfig mapped from a transformers-style config dict (the Hub import path)."""
    try:
        from llm_analysis.hub.mapping import map_hf_config
    except ImportError:
        from llm_analysis.hub.mapping import map_hf_config
    return map_hf_config(d, name=name, source="test", what=name, trust_remote_code=False, revision=None)


BART = dict(model_type="bart", d_model=1024, decoder_layers=12, encoder_layers=12, decoder_attention_heads=16,
            encoder_attention_heads=16, decoder_ffn_dim=4096, encoder_ffn_dim=4096, vocab_size=50265,
            max_position_embeddings=1024)
JAMBA = dict(model_type="jamba", hidden_size=2048, num_attention_heads=16, num_key_value_heads=8, num_hidden_layers=8,
             intermediate_size=5632, vocab_size=65536, max_position_embeddings=4096, attn_layer_period=4,
             attn_layer_offset=2, expert_layer_period=2, expert_layer_offset=1, num_experts=8,
             num_experts_per_tok=2, mamba_d_state=16, mamba_dt_rank=128)
MAMBA2 = dict(model_type="mamba2", hidden_size=2560, num_hidden_layers=16, vocab_size=50288, state_size=128,
              num_heads=80, head_dim=64, n_groups=1, chunk_size=256, expand=2)

# (label, model maker, layouts to try); layouts are ParallelismConfig kwargs
MODELS = [
    ("opt-1.3b", lambda: get_model_config_by_name("facebook_opt-1.3b"), [dict(tp_size=2), dict(dp_size=4)]),
    ("llama2-7b", lambda: get_model_config_by_name("NousResearch_Llama-2-7b-hf"),
     [dict(tp_size=4), dict(tp_size=1, dp_size=8), dict(tp_size=2, pp_size=2, dp_size=2)]),
    ("llama3-8b", lambda: get_model_config_by_name("meta-llama_Llama-3.1-8B"),
     [dict(tp_size=2, dp_size=2), dict(tp_size=2, cp_size=4, cp_comm="all_to_all"), dict(cp_size=2, dp_size=2)]),
    ("llama3-70b", lambda: get_model_config_by_name("meta-llama_Llama-3.1-70B"),
     [dict(tp_size=8, pp_size=2, dp_size=4), dict(tp_size=4, dp_size=8)]),
    ("mixtral", lambda: get_model_config_by_name("mistralai_Mixtral-8x7B-v0.1"),
     [dict(tp_size=2, dp_size=4, ep_size=4), dict(tp_size=8, dp_size=4)]),
    ("qwen3-30b-a3b", lambda: get_model_config_by_name("Qwen_Qwen3-30B-A3B"),
     [dict(tp_size=4, dp_size=2, ep_size=2)]),
    ("dsv2-lite", lambda: get_model_config_by_name("deepseek-ai_DeepSeek-V2-Lite"),
     [dict(tp_size=2, dp_size=2), dict(tp_size=1, dp_size=4, ep_size=4)]),
    ("mistral-7b", lambda: get_model_config_by_name("mistralai_Mistral-7B-v0.1"), [dict(tp_size=1, dp_size=4)]),
    ("gemma2-9b", lambda: get_model_config_by_name("google_gemma-2-9b"), [dict(tp_size=2, dp_size=2)]),
    ("falcon-40b", lambda: get_model_config_by_name("tiiuae_falcon-40b"), [dict(tp_size=4, pp_size=4)]),
    ("qwen3-0.6b", lambda: get_model_config_by_name("Qwen_Qwen3-0.6B"), [dict()]),
    ("gpt-oss-20b", lambda: get_model_config_by_name("openai_gpt-oss-20b"), [dict(tp_size=2, dp_size=2, ep_size=2)]),
    ("bart", lambda: hub(BART, "bart-large-ish"), [dict(tp_size=1), dict(tp_size=2)]),
    ("jamba", lambda: hub(JAMBA, "jamba-small"), [dict(tp_size=2)]),
    ("mamba2", lambda: hub(MAMBA2, "mamba2-ish"), [dict(tp_size=1)]),
]
GPUS = ["a100-sxm-80gb", "h100-sxm-80gb"]
VARIANTS = [  # LLMAnalysis keyword arguments beyond the configs, with the dtype name
    dict(dtype="w16a16e16"),
    dict(dtype="w16a16e16", perf_model="calibrated"),
    dict(dtype="w8a16e16"),
    dict(dtype="fp8", perf_model="calibrated"),
    dict(dtype="w16a16e16", flops_efficiency=0.6, hbm_memory_efficiency=0.8),
]
TRAINING_KW = [dict(ds_zero=0), dict(ds_zero=1, activation_recomputation=2), dict(ds_zero=3, activation_recomputation=1),
               dict(ds_zero=2)]


def row(fn):
    try:
        return {k: repr(v) for k, v in fn().items()}
    except Exception as e:  # the error text is part of the public behaviour
        return {"error": f"{type(e).__name__}: {e}"}


def setups():
    for (label, mk, layouts), gpu, variant in itertools.product(MODELS, GPUS, VARIANTS):
        for k, par in enumerate(layouts):
            yield f"{label} {gpu} {par} {variant}", mk, gpu, par, dict(variant), k


def snapshot(path: str) -> None:
    out = {}
    for name, mk, gpu, par, ctor, k in setups():
        dtype = ctor.pop("dtype")
        try:
            a = LLMAnalysis(mk(), get_gpu_config_by_name(gpu), get_dtype_config_by_name(dtype),
                            ParallelismConfig(**par), **ctor)
        except Exception as e:
            out[name] = {"error": f"{type(e).__name__}: {e}"}
            continue
        enc = "bart" in name
        inf = [row(lambda: a.inference(batch_size_per_gpu=1 + j % 5, seq_len=128 + 97 * j,
                                       num_tokens_to_generate=0 if "cp_size" in par else 16 + j % 3 * 40,
                                       **(dict(encoder_seq_len=300) if enc else {})))
               for j in range(4)]
        tr = [row(lambda: a.training(batch_size_per_gpu=1 + j % 3, seq_len=256 + 256 * j, total_num_tokens=1e9,
                                     gradient_accumulation_steps=1 + j % 2, **TRAINING_KW[(j + k) % 4],
                                     **(dict(encoder_seq_len=300) if enc else {})))
              for j in range(4)]
        out[name] = {"inference": inf, "training": tr}
    plans = {}
    for model, gpus, perf in [("meta-llama/Llama-3.1-8B", ["a100-sxm-80gb", "h100-sxm-80gb"], "roofline"),
                              ("meta-llama/Llama-3.1-70B", ["h100-sxm-80gb"], "calibrated"),
                              ("mistralai/Mixtral-8x7B-v0.1", ["h100-sxm-80gb"], "roofline")]:
        for fn, label in [(lambda: plan_inference(model, gpus, {"max_ttft_s": 2.0, "max_tpot_s": 0.1}, seq_len=1024,
                                                  num_tokens_to_generate=128, perf_model=perf).to_dict(), "infer"),
                          (lambda: plan_training(model, gpus, 1e10, 64, 256, 2048, perf_model=perf).to_dict(),
                           "train")]:
            try:
                d = fn()
                plans[f"plan {label} {model} {gpus} {perf}"] = [{k: repr(v) for k, v in r.items()}
                                                                for r in d.get("rows", d.get("plans", []))[:10]]
            except Exception as e:
                plans[f"plan {label} {model} {gpus} {perf}"] = {"error": f"{type(e).__name__}: {e}"}
    out["plans"] = plans
    with gzip.open(path, "wt") as f:
        json.dump(out, f)
    print("setups", len(out) - 1, "plans", len(plans))


def _close(x, y, rel):
    if x == y:
        return True
    if isinstance(x, str) and isinstance(y, str) and x[:1] in "{[(" and y[:1] in "{[(":
        try:
            x, y = ast.literal_eval(x), ast.literal_eval(y)
        except (ValueError, SyntaxError):
            return False
    if isinstance(x, dict) and isinstance(y, dict):
        return set(x) == set(y) and all(_close(x[k], y[k], rel) for k in x)
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_close(u, v, rel) for u, v in zip(x, y))
    try:
        u, v = float(x), float(y)
    except (TypeError, ValueError):
        return False
    return abs(u - v) <= rel * max(abs(u), abs(v))


def compare(path_a: str, path_b: str, rel: float = 1e-12) -> int:
    with gzip.open(path_a, "rt") as f:
        a = json.load(f)
    with gzip.open(path_b, "rt") as f:
        b = json.load(f)
    bad = 0
    for key in a:
        if not _close(a[key], b.get(key), rel):
            bad += 1
            if bad < 8:
                print("mismatch:", key)
    print("setups", len(a) - 1, "plans", len(a.get("plans", {})), "mismatches", bad, f"(relative tolerance {rel:g})")
    return 1 if bad else 0


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", help="record a snapshot into this .json.gz file")
    ap.add_argument("--compare", nargs="+", metavar=("BEFORE AFTER", "REL"),
                    help="compare two snapshots (optional relative tolerance, default 1e-12)")
    args = ap.parse_args()
    if args.compare:
        if len(args.compare) not in (2, 3):
            ap.error("--compare takes BEFORE AFTER [REL]")
        sys.exit(compare(args.compare[0], args.compare[1], float(args.compare[2]) if len(args.compare) > 2 else 1e-12))
    if not args.out:
        ap.error("give the snapshot file to write, or --compare BEFORE AFTER")
    snapshot(args.out)
