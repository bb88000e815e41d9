"""Llama-2-70B serving on 8 x A100-SXM-40GB: the case of the sister tool's README
(llm_profiler, seeds/000): tp_size 8, batch 20, prompt 1024 tokens, 1024 generated.

Prints our figures next to the sister tool's and the readable report.

    python examples/llama2_70b_inference.py
"""

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name
from llm_analysis.report.render import render

analysis = LLMAnalysis(get_model_config_by_name("upstage_Llama-2-70b-instruct-v2"),
                       get_gpu_config_by_name("a100-sxm-40gb"), get_dtype_config_by_name("w16a16e16"),
                       ParallelismConfig(tp_size=8))
# the eager forward (FlopCounterMode's count), to compare FLOPs with the sister tool;
# the default, conventions="serving", counts causal attention and last-position logits
s = analysis.inference(batch_size_per_gpu=20, seq_len=1024, num_tokens_to_generate=1024, conventions="transformers")

# the sister tool's output for the same setup (seeds/000, "llama2-70b ... tp_size = 8 和 bs = 20")
SISTER = {
    "parameters (G)": (68.71, s["num_params_total"] / 1e9),
    "weights per GPU (GB)": (17.18, s["weight_memory_per_gpu"] / 1e9),
    "KV cache per GPU (GB)": (1.68, s["kv_cache_memory_per_gpu"] / 1e9),
    "decode max batch per GPU": (271, s["decode_max_batch_size_per_gpu"]),
    "prefill max batch per GPU": (340, s["prefill_max_batch_size_per_gpu"]),
    "prefill FLOPs (T)": (3243.71, s["prefill_num_flops_fwd_total"] / 1e12),
    "time to first token (s)": (1.77, s["time_to_first_token"]),
    "time per output token (ms)": (14.58, s["time_per_output_token"] * 1e3),
    "total latency (s)": (16.69, s["total_latency"]),
}

print("Llama-2-70B, 8 x a100-sxm-40gb (tp 8), batch 20, prompt 1024, 1024 generated")
print(f"{'':28} {'llm_profiler':>13} {'llm-analysis':>13}")
for name, (theirs, ours) in SISTER.items():
    fmt = ",d" if isinstance(ours, int) else ",.2f"
    print(f"{name:28} {theirs:>13{fmt}} {ours:>13{fmt}}")
print()
print(render(analysis, s, "inference", color=False))
