"""Serving Mixtral (mixture of experts) on H100 and H200: every expert's weights
must sit in memory, but a decode step reads only the experts its tokens are
routed to, so small batches decode almost like a 13B dense model and larger
batches approach the cost of reading all 47B parameters.

    python examples/mixtral_serving.py
"""

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name
from llm_analysis.errors import DoesNotFitError

PROMPT, OUTPUT = 2048, 256
EFF = dict(flops_efficiency=0.6, hbm_memory_efficiency=0.8)

model = get_model_config_by_name("mistralai/Mixtral-8x7B-v0.1")
a = LLMAnalysis(model, get_gpu_config_by_name("h100-sxm-80gb"), get_dtype_config_by_name("w16a16e16"),
                ParallelismConfig(tp_size=2), **EFF)
print(f"{model.name}: {a.get_num_params_total() / 1e9:.1f} G parameters, "
      f"{a.get_num_active_params_total() / 1e9:.1f} G active per token "
      f"({model.moe_num_experts} experts, top-{model.moe_top_k})")

print(f"\nprompt {PROMPT}, {OUTPUT} generated; flops_efficiency 0.6, hbm_memory_efficiency 0.8")
print(f"{'model':<20}{'GPU':<16}{'dtype':<11}{'tp':>3}{'batch':>6}{'TTFT':>10}{'TPOT':>10}{'tok/s/GPU':>11}"
      f"{'weights/GPU':>12}{'max batch':>10}")
CASES = [("mistralai/Mixtral-8x7B-v0.1", "h100-sxm-80gb", "w16a16e16", 1, 8),
         ("mistralai/Mixtral-8x7B-v0.1", "h100-sxm-80gb", "w16a16e16", 2, 1),
         ("mistralai/Mixtral-8x7B-v0.1", "h100-sxm-80gb", "w16a16e16", 2, 64),
         ("mistralai/Mixtral-8x7B-v0.1", "h100-sxm-80gb", "fp8", 1, 64),
         ("mistralai/Mixtral-8x7B-v0.1", "h200-sxm-141gb", "w16a16e16", 1, 64),
         ("mistralai/Mixtral-8x22B-v0.1", "h100-sxm-80gb", "w16a16e16", 4, 64),
         ("mistralai/Mixtral-8x22B-v0.1", "h200-sxm-141gb", "fp8", 2, 64)]
for name, gpu, dtype, tp, batch in CASES:
    a = LLMAnalysis(get_model_config_by_name(name), get_gpu_config_by_name(gpu), get_dtype_config_by_name(dtype),
                    ParallelismConfig(tp_size=tp), **EFF)
    label = f"{name.split('/')[1]:<20}{gpu:<16}{dtype:<11}{tp:>3}{batch:>6}"
    try:
        s = a.inference(batch_size_per_gpu=batch, seq_len=PROMPT, num_tokens_to_generate=OUTPUT)
    except DoesNotFitError as err:
        print(f"{label}   does not fit: needs {err.needed_bytes / 1e9:.0f} GB per GPU")
        continue
    print(f"{label}{s['time_to_first_token'] * 1e3:>8.0f}ms{s['time_per_output_token'] * 1e3:>8.2f}ms"
          f"{s['total_tokens_per_sec_per_gpu']:>11.0f}{s['weight_memory_per_gpu'] / 1e9:>10.1f}GB"
          f"{s['decode_max_batch_size_per_gpu']:>10d}")

# how the decode step grows with the batch: the experts read per step
a = LLMAnalysis(model, get_gpu_config_by_name("h200-sxm-141gb"), get_dtype_config_by_name("w16a16e16"), **EFF)
print("\nMixtral-8x7B on one H200, decode step vs batch (experts read = expected distinct experts per layer)")
for batch in (1, 2, 4, 8, 16, 64):
    s = a.inference(batch_size_per_gpu=batch, seq_len=PROMPT, num_tokens_to_generate=OUTPUT)
    experts = s["decode_latency_breakdown"]["experts"]  # (the mean decode step's)
    read = experts["bytes_per_gpu"] / 1e9
    print(f"  batch {batch:>4}: time per output token {s['time_per_output_token'] * 1e3:6.2f} ms, "
          f"expert bytes read per step {read:6.1f} GB, {s['decode_tokens_per_sec']:7.0f} tokens/s")
