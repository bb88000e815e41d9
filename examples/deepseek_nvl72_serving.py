"""Serving DeepSeek-R1 in NVFP4 on a GB200 NVL72 rack under TensorRT-LLM: one tensor-parallel group of
8 GPUs against attention data parallelism with the experts spread over 8, 32 or all 72 GPUs of the
rack's NVLink domain. 256 experts do not split over 72 GPUs, so the rack-wide worker runs 32 redundant
expert copies (TensorRT-LLM's load balancer: 288 slots, 4 a GPU).

    python examples/deepseek_nvl72_serving.py
"""

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig
from llm_analysis.errors import ConfigError

MODEL, GPU, DTYPE = "deepseek-ai/DeepSeek-R1", "gb200", "nvfp4"
CLIENTS_PER_GPU, INPUT, OUTPUT = 16, 1024, 1024

LAYOUTS = [("tp 8", dict(tp_size=8)),
           ("tp 1 x adp 8, experts over 8", dict(tp_size=1, attention_dp_size=8, moe_ep_size=8)),
           ("tp 1 x adp 32, experts over 32", dict(tp_size=1, attention_dp_size=32, moe_ep_size=32)),
           ("tp 1 x adp 72, experts over 72", dict(tp_size=1, attention_dp_size=72, moe_ep_size=72)),
           ("tp 1 x adp 72, experts over 72 + 32", dict(tp_size=1, attention_dp_size=72, moe_ep_size=72,
                                                        moe_redundant_experts=32))]

print(f"{MODEL} ({DTYPE}) on GB200 NVL72, TensorRT-LLM, {CLIENTS_PER_GPU} clients per GPU, "
      f"{INPUT} + {OUTPUT} tokens (calibrated model)")
print(f"{'worker':<38}{'GPUs':>5}{'TTFT':>10}{'TPOT':>10}{'tok/s/GPU':>11}{'weights/GPU':>13}{'KV/GPU':>9}")
for label, fields in LAYOUTS:
    try:
        a = LLMAnalysis(MODEL, GPU, DTYPE, ParallelismConfig(**fields), perf_model="calibrated")
        gpus = fields["tp_size"] * fields.get("attention_dp_size", 1)
        s = a.serve(concurrency=CLIENTS_PER_GPU * gpus, input_len=INPUT, output_len=OUTPUT, framework="trtllm",
                    num_requests=0)
    except ConfigError as err:
        print(f"{label:<38}refused: {str(err)[:90]}...")
        continue
    print(f"{label:<38}{s['num_gpus']:>5}{s['ttft_s'] * 1e3:>8.0f}ms{s['tpot_s'] * 1e3:>8.1f}ms"
          f"{s['output_tokens_per_s_per_gpu']:>11.0f}{s['weight_memory_per_gpu'] / 1e9:>11.1f}GB"
          f"{s['kv_pool_bytes_per_gpu'] / 1e9:>7.1f}GB")
