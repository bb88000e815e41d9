"""Capacity planning from code: how many GPUs serve 256 concurrent chat requests
of Llama-3.1-70B (prompt 2048 tokens, 512 generated) with at most 50 ms per
output token, on H100 or H200, in bf16 or fp8 — and what it costs per hour.

Uses llm_analysis.planner.capacity.plan_capacity: for every tensor x pipeline layout
that fits in one node it finds the largest batch per replica that meets the
latency target, then the number of replicas; the layout needing the fewest GPUs
wins. GPU-hour prices are assumptions: edit PRICES.

That first answer is for static batches: a replica prefills its whole batch together
(256 prompts of 2048 tokens: the TTFT column is that prefill, tens of seconds) and then
decodes it together. Its $/1M tokens counts the whole request, prefill included (a replica
emits batch x OUTPUT tokens every TTFT + (OUTPUT - 1) x TPOT). Serving engines (vLLM,
SGLang, TensorRT-LLM) batch continuously instead: a request is admitted as soon as a slot
frees, its prefill shares steps with the others' decodes. The second table sizes the same
deployment with `serve()` (expected times, the vLLM engine profile): how many replicas of the
static plan's layout keep the mean TPOT under the target at 256 concurrent users.

    python examples/capacity_planning.py
"""

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.planner.capacity import plan_capacity
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
from llm_analysis.errors import DoesNotFitError

MODEL = "meta-llama/Llama-3.1-70B"
REQUESTS, PROMPT, OUTPUT, TPOT_TARGET_S = 256, 2048, 512, 0.050
PRICES = {"h100-sxm-80gb": 2.50, "h200-sxm-141gb": 3.50}  # dollars per GPU-hour (assumed)
EFF = dict(flops_efficiency=0.6, hbm_memory_efficiency=0.8)

model = get_model_config_by_name(MODEL)
print(f"{model.name}: {REQUESTS} concurrent requests, prompt {PROMPT}, {OUTPUT} generated, "
      f"time per output token <= {TPOT_TARGET_S * 1e3:.0f} ms")
print("static batches (each replica prefills its batch together, then decodes it):")
print(f"{'GPU':<16}{'dtype':<11}{'layout':<10}{'batch':>6}{'replicas':>9}{'GPUs':>6}{'nodes':>6}{'TPOT':>9}"
      f"{'TTFT':>9}{'$/hour':>9}{'$/1M tokens':>12}")
plans = {}
for gpu_name, price in PRICES.items():
    for dtype_name in ("w16a16e16", "fp8"):
        try:
            plan = plan_capacity(model, get_gpu_config_by_name(gpu_name), get_dtype_config_by_name(dtype_name),
                                 prompt_len=PROMPT, output_len=OUTPUT, concurrent_requests=REQUESTS,
                                 per_token_latency_target_s=TPOT_TARGET_S, **EFF)
        except DoesNotFitError as err:
            print(f"{gpu_name:<16}{dtype_name:<11}no layout: {err}")
            continue
        b = plan["best"]
        plans[(gpu_name, dtype_name)] = plan
        per_hour = b["num_gpus"] * price
        # a batch's requests finish together after its prefill and OUTPUT - 1 decode steps
        request_s = b["time_to_first_token"] + (OUTPUT - 1) * b["time_per_output_token"]
        tokens_per_hour = REQUESTS * OUTPUT / request_s * 3600
        print(f"{gpu_name:<16}{dtype_name:<11}{'tp' + str(b['tp_size']) + ' pp' + str(b['pp_size']):<10}"
              f"{b['batch_per_replica']:>6}{b['replicas']:>9}{b['num_gpus']:>6}{b['num_nodes']:>6}"
              f"{b['time_per_output_token'] * 1e3:>7.1f}ms{b['time_to_first_token']:>8.2f}s"
              f"{per_hour:>9.2f}{per_hour / tokens_per_hour * 1e6:>12.3f}")

gpu_name, dtype_name = "h100-sxm-80gb", "w16a16e16"
print(f"\nevery layout considered on {gpu_name} ({dtype_name}), fewest GPUs first:")
for c in plans[(gpu_name, dtype_name)]["candidates"]:
    print(f"  tp{c['tp_size']} pp{c['pp_size']}: batch {c['batch_per_replica']:>4} x {c['replicas']:>3} replicas = "
          f"{c['num_gpus']:>3} GPUs, {c['time_per_output_token'] * 1e3:5.1f} ms per token, "
          f"weights {c['weight_memory_per_gpu'] / 1e9:5.1f} GB + KV cache {c['kv_cache_memory_per_gpu'] / 1e9:5.1f} GB per GPU")

print(f"\ncontinuous batching (serve(), vLLM engine, expected times), {REQUESTS} concurrent users on the "
      f"static plan's layout:")
print(f"{'GPU':<16}{'dtype':<11}{'layout':<10}{'replicas':>9}{'GPUs':>6}{'TPOT':>9}{'TTFT':>9}{'TTFT p90':>10}"
      f"{'$/1M tokens':>12}")
for (gpu_name, dtype_name), plan in plans.items():
    if gpu_name != "h100-sxm-80gb":
        continue
    b = plan["best"]
    for replicas in range(1, 9):  # the fewest replicas whose mean TPOT meets the target
        a = LLMAnalysis(model, get_gpu_config_by_name(gpu_name), get_dtype_config_by_name(dtype_name),
                        ParallelismConfig(tp_size=b["tp_size"], pp_size=b["pp_size"], dp_size=replicas),
                        perf_model="calibrated")
        s = a.serve(concurrency=REQUESTS, input_len=PROMPT, output_len=OUTPUT, framework="vllm")
        if s["tpot_s"] <= TPOT_TARGET_S:
            break
    per_hour = s["num_gpus"] * PRICES[gpu_name]
    print(f"{gpu_name:<16}{dtype_name:<11}{'tp' + str(b['tp_size']) + ' pp' + str(b['pp_size']):<10}{replicas:>9}"
          f"{s['num_gpus']:>6}{s['tpot_s'] * 1e3:>7.1f}ms{s['ttft_s']:>8.2f}s{s['ttft_p90_s']:>9.2f}s"
          f"{per_hour / (s['output_tokens_per_s'] * 3600) * 1e6:>12.3f}")
