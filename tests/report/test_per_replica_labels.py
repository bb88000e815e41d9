"""A batch is counted per model replica (tp x cp x pp GPUs work on the same sequences), and the
report says so wherever the replica is more than one GPU (issue 28 item 2). A tp-8 Llama-3.1-70B
replica holding a batch of 64 runs 64 sequences on 8 GPUs, not 64 on each."""

from __future__ import annotations

import subprocess
import sys


def _report(*args):
    run = subprocess.run([sys.executable, "-m", "llm_analysis.analysis", *args, "--perf_model", "roofline"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return run.stdout


def _row(text, label):
    return next(line for line in text.splitlines() if line.strip().startswith(label))


def test_inference_batches_are_per_replica_at_tp_8():
    text = _report("infer", "--model_name", "meta-llama/Llama-3.1-70B", "--gpu_name", "h100-sxm-80gb",
                   "--tp_size", "8", "--batch_size_per_gpu", "64")
    assert "batch 64 per replica (tp 8 = 8 GPUs)" in _row(text, "request")
    assert "per replica (tp 8 = 8 GPUs)" in _row(text, "largest batch")
    assert "per GPU" not in _row(text, "request") + _row(text, "largest batch")


def test_one_gpu_replicas_say_per_gpu():
    text = _report("infer", "--model_name", "meta-llama/Llama-3.1-8B", "--gpu_name", "h100-sxm-80gb",
                   "--batch_size_per_gpu", "8")
    assert "batch 8 per GPU" in _row(text, "request")


def test_training_micro_batch_names_the_replica_of_tp_and_pp():
    text = _report("train", "--model_name", "megatron-lm-175b", "--gpu_name", "a100-sxm-80gb", "--tp_size", "8",
                   "--pp_size", "16", "--total_num_gpus", "1024", "--global_batch_size", "1536", "--seq_len", "2048",
                   "--activation_recomputation", "4", "--batch_size_per_gpu", "1")
    assert "micro-batch 1 per replica (tp 8 x pp 16 = 128 GPUs)" in _row(text, "batch")
    assert "per replica (tp 8 x pp 16 = 128 GPUs)" in _row(text, "largest micro-batch")
