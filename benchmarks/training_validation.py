"""Predicted vs reported for the training records of the shared validation file.

    python benchmarks/training_validation.py [path/to/published_measurements.json]

Default path: benchmarks/data/validation/published_measurements.json (a copy of the shared set) in the
repository (or $LLM_ANALYSIS_VALIDATION). For each record of kind "training"
that gives enough of its setup (model shapes, GPU count and layout or a
throughput), the record is rebuilt (ModelConfig from its shapes, its layout,
batch, recomputation, ZeRO stage, sequence parallelism, interleaving) and run
through `LLMAnalysis.training`:

- `pred(flops)`: the time from the FLOP count over the record's own achieved
  TFLOP/s per GPU (hardware TFLOP/s when it gives HFU, tokens/s x 6N when it
  gives only a token rate), i.e. `latency_per_iter_using_flops` /
  `total_training_latency_using_flops` / `gpu_hours_using_flops`;
- `full@rec`: the full time model (roofline + communication + bubble +
  optimizer) with kernels at the record's TFLOP/s: an upper estimate, since a
  published end-to-end TFLOP/s already contains those losses;
- `full@peak`: the full model with kernels at the dense peak: a lower bound.

Records that report only a TFLOP/s figure are compared on the iteration time
their own FLOP formula implies (Megatron-LM eq. 3, stated in the record) when
the record states it. Records without enough setup are listed as skipped, with
the reason. Layout choices the record does not state are printed in `notes`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llm_analysis.analysis import ActivationRecomputation, DSZeRO, LLMAnalysis  # noqa: E402
from llm_analysis.config import ModelConfig, ParallelismConfig, get_gpu_config_by_name  # noqa: E402
from llm_analysis.errors import LLMAnalysisError  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PATH = REPO / "benchmarks" / "data" / "validation" / "published_measurements.json"

# public shapes of the LLaMA family (arXiv 2302.13971 Table 2; FFN width from the
# released model code: 2/3 * 4h rounded up to a multiple of 256)
LLAMA1_FFN = {4096: 11008, 5120: 13824, 6656: 17920, 8192: 22016}


class Skip(Exception):
    pass


def _gpu(name: str):
    n = name.lower()
    if "h100" in n:
        return get_gpu_config_by_name("h100-sxm-80gb")
    if "a100" in n:  # every A100 record is an 80 GB SXM part (DGX A100 / Selene / Jean Zay / LLaMA)
        return get_gpu_config_by_name("a100-sxm-80gb")
    raise Skip(f"GPU {name!r} not in the catalogue")


def _model(setup: dict, notes: list) -> ModelConfig:
    name = setup.get("model", "?")
    for k in ("layers", "hidden", "heads"):
        if k not in setup:
            raise Skip(f"no model shapes ({k} missing)")
    L, h, a, s = setup["layers"], setup["hidden"], setup["heads"], setup.get("seq_len", 2048)
    if "llama" in name.lower():
        if "Llama 3" in name or "Llama 2" in name:
            raise Skip("Llama 2/3 card: no layout or throughput")
        return ModelConfig(name=name, num_layers=L, n_head=a, hidden_dim=h, vocab_size=32000, max_seq_len=s,
                           ffn_embed_dim=LLAMA1_FFN[h], mlp_gated_linear_units=True, activation="silu",
                           norm_type="rmsnorm", norm_bias=False, position_embedding_type="rotary",
                           tie_word_embeddings=False)
    if "bloom" in name.lower():
        return ModelConfig(name=name, num_layers=L, n_head=a, hidden_dim=h, vocab_size=setup["vocab"], max_seq_len=s,
                           qkv_bias=True, attn_out_bias=True, mlp_bias=True, embedding_norm=True,
                           position_embedding_type="alibi")
    vocab = setup.get("vocab")
    if vocab is None:
        if "GPT-2" in name:
            vocab = 50304
            notes.append("V=50304 (llm.c padded GPT-2)")
        else:
            vocab = 51200
            notes.append("V=51200 (paper)")
    return ModelConfig(name=name, num_layers=L, n_head=a, hidden_dim=h, vocab_size=vocab, max_seq_len=s,
                       qkv_bias=True, attn_out_bias=True, mlp_bias=True, position_embedding_type="learned")


def _recompute(setup: dict, rid: str) -> ActivationRecomputation:
    r = str(setup.get("activation_recompute", "")).lower()
    if rid.startswith("megatron2021") or r.startswith("full"):
        return ActivationRecomputation.FULL
    if r.startswith("selective"):
        return ActivationRecomputation.ATTN_COMPUTE
    return ActivationRecomputation.NONE


def _layout(setup: dict, model: ModelConfig, notes: list):
    n = setup.get("num_gpus")
    if n is None:
        raise Skip("no GPU count")
    tp, pp = setup.get("tp"), setup.get("pp")
    if tp is None or pp is None:
        mp = setup.get("model_parallel_size")
        if mp is not None:
            tp = min(mp, 8)
            pp = mp // tp
        else:  # not stated: the first of these that divides and keeps 16 bytes/param under 48 GB
            params = 12 * model.num_layers * model.hidden_dim ** 2
            tp, pp = next(((t_, p_) for t_, p_ in ((1, 1), (8, 1), (8, 2), (8, 4), (8, 8), (8, 16), (8, 32))
                           if n % (t_ * p_) == 0 and model.n_head % t_ == 0 and model.num_layers % p_ == 0
                           and params * 16 / (t_ * p_) < 48e9), (8, 64))
        notes.append(f"layout assumed tp={tp} pp={pp}")
    dp = setup.get("dp") or n // (tp * pp)
    if tp * pp * dp != n:
        raise Skip(f"tp*pp*dp = {tp * pp * dp} != num_gpus {n}")
    return tp, pp, dp


def _achieved(setup: dict, meas: dict, gpu, model_params: float, notes: list):
    if "hfu_pct" in meas:
        return meas["hfu_pct"] / 100 * gpu.peak_fp16_TFLOPS, "HFU x peak"
    for k in ("achieved_tflops_per_gpu", "tflops_per_gpu"):
        if k in meas:
            return float(meas[k]), k
    if "tokens_per_s_per_gpu" in meas:
        # Kaplan et al. 2020 (arXiv 2001.08361) §2.1: 6N + 6 n_layer n_ctx d_model FLOPs per token
        p = setup.get("params_b", model_params / 1e9) * 1e9
        per_token = 6 * p + 6 * setup["layers"] * setup["seq_len"] * setup["hidden"]
        return meas["tokens_per_s_per_gpu"] * per_token / 1e12, "tokens/s x (6N + 6lsh)"
    return None, None


def evaluate(rec: dict):
    rid, setup, meas = rec["id"], rec["setup"], rec["measured"]
    notes: list = []
    quantities = [k for k in ("iteration_time_s", "step_time_s", "training_days_estimate", "training_days",
                              "training_days_300b_tokens", "gpu_hours") if k in meas]
    formula = "96*B*s*l*h^2" in rec.get("notes", "")
    if not quantities and not formula:
        raise Skip("reports no time (only " + ", ".join(sorted(meas)) + ")")
    if "gpu" not in setup:
        raise Skip("no GPU given")
    gpu = _gpu(setup["gpu"])
    model = _model(setup, notes)
    tp, pp, dp = _layout(setup, model, notes)
    seq = setup.get("seq_len", 2048)
    gbs = setup.get("global_batch") or int(setup.get("global_batch_tokens", 0) // seq) or None
    if gbs is None:
        gbs = 1536 if "175" in setup.get("model", "") else 3072
        notes.append(f"global batch {gbs} (paper Table 1)")
    if gbs % dp:
        gbs = (gbs // dp) * dp
        notes.append(f"global batch rounded to {gbs}")
    mb = setup.get("micro_batch", 1)
    if (gbs // dp) % mb:
        mb = 1
    sp = tp if setup.get("sequence_parallel") or "sequence" in setup.get("parallelism", "") else 1
    rc = _recompute(setup, rid)
    zero = DSZeRO(setup.get("zero_stage", 0))
    v = setup.get("interleaved_pipeline_stages", 1)
    par = ParallelismConfig(tp_size=tp, pp_size=pp, dp_size=dp, sp_size=sp)
    # flash-attention-era runs (LLaMA: xformers causal kernels) compute only the causal half
    conv = dict(attention_flops="causal") if "llama" in setup.get("model", "").lower() else {}
    probe = LLMAnalysis(model, gpu, parallelism_config=par, **conv)
    achieved, src = _achieved(setup, meas, gpu, probe.get_num_params_total(), notes)
    tokens = setup.get("tokens") or (300e9 if "training_days_300b_tokens" in meas else None)
    kw = dict(batch_size_per_gpu=mb, global_batch_size=gbs, seq_len=seq, total_num_tokens=tokens,
              activation_recomputation=rc, ds_zero=zero, pipeline_interleave=v, layernorm_dtype_bytes=2)
    if rid.startswith("llmc"):
        kw["flash_attn"] = True
    rows = []
    full_peak = LLMAnalysis(model, gpu, parallelism_config=par, **conv).training(**kw)
    if achieved is None:
        res = None
        full_rec = None
        notes.append("no TFLOP/s in record: only full@peak")
    else:
        an = LLMAnalysis(model, gpu, parallelism_config=par, achieved_tflops=achieved, **conv)
        res = an.training(**kw)
        full_rec = res
    for q in quantities:
        rep = meas[q]
        if q in ("iteration_time_s", "step_time_s"):
            key_f, key_full, scale = "latency_per_iter_using_flops", "latency_per_iter", 1.0
        elif q == "gpu_hours":
            key_f, key_full, scale = "gpu_hours_using_flops", "gpu_hours", 1.0
        else:
            key_f, key_full, scale = "total_training_latency_using_flops", "total_training_latency", 1 / 86400
        pred = res[key_f] * scale if res is not None and res[key_f] is not None else None
        rows.append((rid, q, rep, pred, full_rec[key_full] * scale if full_rec else None,
                     full_peak[key_full] * scale if full_peak[key_full] is not None else None, src, notes))
    if formula and achieved is not None:
        B, s, l, h = gbs, seq, model.num_layers, model.hidden_dim
        V = model.vocab_size
        F = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
        implied = F / (tp * pp * dp * achieved * 1e12)
        rows.append((rid, "iter_s (eq.3 / TFLOP/s)", implied, res["latency_per_iter_using_flops"],
                     res["latency_per_iter"], full_peak["latency_per_iter"], src, notes))
    return rows


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    path = Path(argv[0]) if argv else Path(os.environ.get("LLM_ANALYSIS_VALIDATION", DEFAULT_PATH))
    records = [r for r in json.loads(path.read_text()) if r.get("kind") == "training"]
    t0 = time.perf_counter()
    rows, skipped = [], []
    for rec in records:
        try:
            rows.extend(evaluate(rec))
        except Skip as e:
            skipped.append((rec["id"], str(e)))
        except LLMAnalysisError as e:
            skipped.append((rec["id"], f"{type(e).__name__}: {str(e)[:160]}"))
    fmt = "{:<44} {:<26} {:>11} {:>11} {:>8} {:>11} {:>11}  {}"
    print(fmt.format("record", "quantity", "reported", "pred(flops)", "err%", "full@rec", "full@peak",
                     "TFLOP/s from; notes"))
    errs = []
    for rid, q, rep, pred, full_rec, full_peak, src, notes in rows:
        err = None if pred is None else 100 * (pred - rep) / rep
        if err is not None:
            errs.append(abs(err))
        f = lambda x: "-" if x is None else f"{x:.4g}"  # noqa: E731
        print(fmt.format(rid[:44], q[:26], f(rep), f(pred), "-" if err is None else f"{err:+.1f}", f(full_rec),
                         f(full_peak), "; ".join(([src] if src else []) + notes)))
    print(f"\n{len(rows)} comparisons from {len(records) - len(skipped)} records; "
          f"|err| of pred(flops): median {sorted(errs)[len(errs) // 2]:.1f}%, max {max(errs):.1f}%"
          if errs else "")
    print(f"skipped {len(skipped)} records:")
    for rid, why in skipped:
        print(f"  {rid}: {why}")
    print(f"({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
