"""Training LLaMA-65B (Touvron et al. 2023, arXiv 2302.13971 §2.4, Table 15):
2048 A100-80GB GPUs, 1.4 T tokens, batches of 4 M tokens (2048 sequences of 2048),
selective activation recomputation with model and sequence parallelism.
The paper reports about 380 tokens/s per GPU, about 21 days, and 1,022,362
GPU-hours. It does not give the parallel layout; we assume tp 8, pp 4.

    python examples/llama_65b_training.py
"""

from llm_analysis.analysis import train

PAPER = {"tokens/s per GPU": 380, "days": 21, "GPU-hours": 1_022_362}
print("LLaMA-65B on 2048 x A100-80GB, 1.4 T tokens, global batch 2048 x 2048 tokens (tp 8, pp 4, dp 64, "
      "selective recomputation)")
print(f"{'':28}{'tokens/s/GPU':>13}{'days':>7}{'GPU-hours':>12}{'MFU':>6}{'memory/GPU':>12}")
print(f"{'paper':28}{PAPER['tokens/s per GPU']:>13}{PAPER['days']:>7}{PAPER['GPU-hours']:>12,}")
for eff in (0.6, 0.7):
    s = train(model_name="decapoda-research_llama-65b-hf", gpu_name="a100-sxm-80gb", tp_size=8, pp_size=4,
              total_num_gpus=2048, global_batch_size=2048, batch_size_per_gpu=1, seq_len=2048,
              total_num_tokens=1.4e12, activation_recomputation=1, flops_efficiency=eff, log_level="WARNING",
              quiet=True)
    print(f"{'ours, flops_efficiency ' + str(eff):28}{s['tokens_per_sec_per_gpu']:>13.0f}"
          f"{s['total_training_latency'] / 86400:>7.1f}{s['gpu_hours']:>12,.0f}{s['mfu']:>6.0%}"
          f"{s['estimated_peak_memory_per_gpu'] / 1e9:>10.1f}GB")
print(f"\nwhere an iteration of {s['latency_per_iter']:.2f} s goes (flops_efficiency 0.7):")
for key, value in s.items():
    if key.startswith("latency_per_iter_") and not key.endswith(("using_flops", "_total", "_hidden")) and value:
        print(f"  {key[len('latency_per_iter_'):]:<20}{value:8.3f} s  {value / s['latency_per_iter']:6.1%}")
