"""Training GPT-3 175B with Megatron-LM on A100-80GB, against two papers.

1. Narayanan et al. 2021 (arXiv 2104.04473, §5.1): 1024 GPUs, global batch 1536,
   300 B tokens at a measured 140 TFLOP/s per GPU -> "about 34 days", from
   time = 8 T P / (n X) (forward + backward + full recomputation).
2. Korthikanti et al. 2022 (arXiv 2205.05198, Table 5): 64 GPUs (tp 8, pp 8 with 3
   interleaved stages), global batch 64, micro-batch 1: 13.75 s per iteration
   with selective recomputation + sequence parallelism, 18.13 s with full
   recomputation.

    python examples/megatron_gpt3_175b_training.py
"""

from llm_analysis.analysis import train

COMMON = dict(model_name="megatron-lm-175b", gpu_name="a100-sxm-80gb", seq_len=2048, batch_size_per_gpu=1,
              log_level="WARNING", quiet=True)

print("1. Narayanan et al. 2021: GPT-3 175B, 1024 x A100-80GB (tp 8, pp 16, dp 8), batch 1536, 300 B tokens")
s = train(**COMMON, tp_size=8, pp_size=16, total_num_gpus=1024, global_batch_size=1536, total_num_tokens=300e9,
          activation_recomputation=4, achieved_tflops=140)
print("   paper: about 34 days at a measured 140 TFLOP/s per GPU")
print(f"   ours, FLOPs / 140 TFLOP/s (the paper's formula):    {s['total_training_latency_using_flops'] / 86400:5.1f} days, "
      f"{s['gpu_hours_using_flops']:,.0f} GPU-hours")
print(f"   ours, full time model with kernels at 140 TFLOP/s:  {s['total_training_latency'] / 86400:5.1f} days "
      f"(+ pipeline bubble {s['latency_per_iter_pipeline_bubble']:.1f} s and communication per {s['latency_per_iter']:.1f} s iteration)")
for eff in (0.6, 0.7):
    s = train(**COMMON, tp_size=8, pp_size=16, total_num_gpus=1024, global_batch_size=1536, total_num_tokens=300e9,
              activation_recomputation=4, flops_efficiency=eff)
    print(f"   ours, full time model, flops_efficiency {eff}:        {s['total_training_latency'] / 86400:5.1f} days "
          f"({s['achieved_flops_per_s'] / 1e12:.0f} TFLOP/s per GPU end to end, MFU {s['mfu']:.0%})")

print("\n2. Korthikanti et al. 2022, Table 5: GPT-3 175B on 64 x A100-80GB (tp 8, pp 8, interleaved x3), batch 64")
print(f"   {'recomputation':<36}{'paper':>9}{'ours':>9}{'MFU':>7}{'HFU':>7}")
for label, rc, sp, paper in (("selective + sequence parallelism", 1, None, 13.75), ("full, no sequence parallelism", 4, 1,
                                                                                  18.13)):
    s = train(**COMMON, tp_size=8, pp_size=8, total_num_gpus=64, global_batch_size=64, activation_recomputation=rc,
              sp_size=sp, pipeline_interleave=3, flops_efficiency=0.65)
    print(f"   {label:<36}{paper:>8.2f}s{s['latency_per_iter']:>8.2f}s{s['mfu']:>7.1%}{s['hfu']:>7.1%}")
print("   (ours with flops_efficiency 0.65: matmuls at 65% of the 312 TFLOP/s peak)")
