"""Serving Llama 3.1 8B and 70B on H100 and H200: time to first token, time per
output token, throughput and the largest batch, for a few layouts and weight
types; then one check against a measurement (gpt-fast, Llama-3.1-8B bf16 batch 1
on an A100-80GB: 93.8 tokens/s at 1408 GB/s achieved bandwidth).

    python examples/llama3_serving.py
"""

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name
from llm_analysis.errors import DoesNotFitError

PROMPT, OUTPUT, BATCH = 2048, 512, 16
# realistic kernel efficiencies for a serving engine (the default 1.0 gives lower bounds)
EFF = dict(flops_efficiency=0.6, hbm_memory_efficiency=0.8)

CASES = [  # model, gpu, dtype, tp
    ("meta-llama/Llama-3.1-8B", "h100-sxm-80gb", "w16a16e16", 1),
    ("meta-llama/Llama-3.1-8B", "h100-sxm-80gb", "fp8", 1),
    ("meta-llama/Llama-3.1-8B", "h200-sxm-141gb", "w16a16e16", 1),
    ("meta-llama/Llama-3.1-70B", "h100-sxm-80gb", "w16a16e16", 1),
    ("meta-llama/Llama-3.1-70B", "h100-sxm-80gb", "w16a16e16", 4),
    ("meta-llama/Llama-3.1-70B", "h100-sxm-80gb", "fp8", 2),
    ("meta-llama/Llama-3.1-70B", "h200-sxm-141gb", "w16a16e16", 2),
    ("meta-llama/Llama-3.1-70B", "h200-sxm-141gb", "fp8", 1),
]

print(f"batch {BATCH}, prompt {PROMPT}, {OUTPUT} generated; flops_efficiency 0.6, hbm_memory_efficiency 0.8")
print(f"{'model':<16}{'GPU':<16}{'dtype':<11}{'tp':>3}{'TTFT':>10}{'TPOT':>10}{'tok/s/GPU':>11}"
      f"{'mem/GPU':>10}{'max batch':>10}")
for model, gpu, dtype, tp in CASES:
    a = LLMAnalysis(get_model_config_by_name(model), get_gpu_config_by_name(gpu), get_dtype_config_by_name(dtype),
                    ParallelismConfig(tp_size=tp), **EFF)
    label = f"{model.split('/')[1]:<16}{gpu:<16}{dtype:<11}{tp:>3}"
    try:
        s = a.inference(batch_size_per_gpu=BATCH, seq_len=PROMPT, num_tokens_to_generate=OUTPUT)
    except DoesNotFitError as err:
        print(f"{label}   does not fit: needs {err.needed_bytes / 1e9:.0f} GB per GPU")
        continue
    print(f"{label}{s['time_to_first_token'] * 1e3:>8.0f}ms{s['time_per_output_token'] * 1e3:>8.2f}ms"
          f"{s['total_tokens_per_sec_per_gpu']:>11.0f}{s['memory_used_per_gpu'] / 1e9:>8.1f}GB"
          f"{s['decode_max_batch_size_per_gpu']:>10d}")

# one check against a measurement: gpt-fast README (pytorch-labs/gpt-fast @c9f683edd4), Llama-3.1-8B bf16,
# batch 1, A100-SXM4-80GB: 93.83 tokens/s while reading weights at 1408.37 GB/s
a = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-8B"), get_gpu_config_by_name("a100-sxm-80gb"),
                achieved_memory_bandwidth_GBs=1408.37)
s = a.inference(batch_size_per_gpu=1, seq_len=5, num_tokens_to_generate=200)
print(f"\ngpt-fast check, Llama-3.1-8B bf16 batch 1 on A100-80GB at 1408 GB/s: predicted "
      f"{s['decode_tokens_per_sec']:.1f} tokens/s, measured 93.83 tokens/s "
      f"({s['decode_tokens_per_sec'] / 93.83 - 1:+.1%})")
