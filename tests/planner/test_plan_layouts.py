"""Issue 26 item 4: `plan infer` with a load searches MoE worker layouts (attention_dp x tp, moe_tp x
moe_ep) on the serving model, sizes disaggregated pools on serve(disaggregated=...), and writes the
engine launch arguments of a row (--emit_launch)."""

from __future__ import annotations

import pytest

from llm_analysis.cli.plan import plan_infer_command
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
from llm_analysis.facade import LLMAnalysis
from llm_analysis.planner import plan_inference
from llm_analysis.planner.launch import LAUNCH_ENGINES, row_launch

MIXTRAL = "mistralai/Mixtral-8x7B-v0.1"
GPU = "a100-sxm-40gb"
# TTFT 1.5 s: with SGLang's refitted profile (benchmark_rounds 1.0, API latency 0.2 s) one replica of any
# layout answers in 1.1-1.3 s, so the TPOT target alone separates the layouts (attention replicas: 8 GPUs)
# TPOT 22 ms: SGLang's profile refitted with the MoE shares per engine (step overhead 0.80 ms) gives one
# replica TPOT 24.4 ms at tp 8 (16 GPUs needed), 20.0-21.2 ms with 4-8 attention replicas (8 GPUs)
# TPOT 23.7 ms: with SGLang's fitted expert-parallel imbalance (1.2, serving/layout.py) one replica at tp 8 runs
# 24.4 ms (16 GPUs needed), tp 1 x 8 attention replicas 23.1 ms (8 GPUs), the other layouts 24.4-27.3 ms
# TPOT 26.5 ms: SGLang's profile refitted after serve() times the engines' measured all-reduce (step overhead
# 2.82 ms, cost/engine_allreduce.py): one replica at tp 8 runs 28.3 ms (16 GPUs needed), tp 1 x 8 attention
# replicas 25.5 ms (8 GPUs), the other layouts 27.1-31.3 ms
TARGETS = {"max_ttft_s": 1.5, "max_tpot_s": 0.0265, "concurrency": 128}
WORKLOAD = {"input_len": 1024, "output_len": 128, "framework": "sglang"}
# what the planner passes to every analysis: roofline times (hardware specifications only, so the case
# does not move when the calibration profiles are refitted), the serving engines' conventions
ANALYSIS = {"perf_model": "roofline", "attention_flops": "causal", "logits": "last", "mla_attention": "absorb"}


@pytest.fixture(scope="module")
def mixtral_plan():
    return plan_inference(MIXTRAL, [GPU], TARGETS, seq_len=1024, num_tokens_to_generate=128,
                          perf_model="roofline", framework="sglang", max_worker_gpus=8, emit_launch="sglang")


def _fewest_gpus_by_hand(par: dict, most_replicas: int = 4):
    """The fewest GPUs of `par`'s worker meeting TARGETS, trying 1..most_replicas workers with serve()."""
    m, g, d = get_model_config_by_name(MIXTRAL), get_gpu_config_by_name(GPU), get_dtype_config_by_name("w16a16e16")
    for replicas in range(1, most_replicas + 1):
        s = LLMAnalysis(m, g, d, ParallelismConfig(**par, dp_size=replicas), **ANALYSIS).serve(
            concurrency=TARGETS["concurrency"], num_requests=0, **WORKLOAD)
        if s["ttft_s"] <= TARGETS["max_ttft_s"] and s["tpot_s"] <= TARGETS["max_tpot_s"]:
            return s["num_gpus"]
    return None


def test_the_search_is_no_worse_than_any_layout_tried_by_hand(mixtral_plan):
    # a tiny space by brute force: tensor-parallel experts, expert-parallel experts, and wide expert
    # parallelism with attention replicas (every expert whole on one GPU)
    by_hand = {
        "tp8, experts 8x1": {"tp_size": 8, "moe_tp_size": 8, "moe_ep_size": 1},
        "tp8, experts 1x8": {"tp_size": 8, "moe_tp_size": 1, "moe_ep_size": 8},
        "tp4 x adp2, experts 1x8": {"tp_size": 4, "attention_dp_size": 2, "moe_tp_size": 1, "moe_ep_size": 8},
        "tp2 x adp4, experts 1x8": {"tp_size": 2, "attention_dp_size": 4, "moe_tp_size": 1, "moe_ep_size": 8},
        "tp1 x adp8, experts 1x8": {"tp_size": 1, "attention_dp_size": 8, "moe_tp_size": 1, "moe_ep_size": 8},
    }
    gpus = {name: _fewest_gpus_by_hand(par) for name, par in by_hand.items()}
    tried = [g for g in gpus.values() if g is not None]
    assert tried, gpus
    assert mixtral_plan.best["figures"]["num_gpus"] <= min(tried), (mixtral_plan.best["layout"], gpus)
    # the case is one where the layouts differ: a tensor-parallel-only search would not find the best
    assert min(tried) < gpus["tp8, experts 8x1"], gpus


def test_every_row_s_serve_call_text_reproduces_its_figures(mixtral_plan):
    namespace = {"LLMAnalysis": LLMAnalysis, "ParallelismConfig": ParallelismConfig,
                 "get_model_config_by_name": get_model_config_by_name, "get_gpu_config_by_name": get_gpu_config_by_name,
                 "get_dtype_config_by_name": get_dtype_config_by_name}
    for row in mixtral_plan.rows[:3]:
        s = eval(row["reproduce"]["serve_call"], namespace)  # the text a user would paste
        assert s["num_gpus"] == row["figures"]["num_gpus"]
        assert s["ttft_s"] == pytest.approx(row["figures"]["ttft_s"], rel=1e-12)
        assert s["tpot_s"] == pytest.approx(row["figures"]["tpot_s"], rel=1e-12)
        for key in ("weight_memory_per_gpu", "kv_pool_bytes_per_gpu", "workspace_memory_per_gpu"):
            assert s[key] == row["figures"][key]
        par = row["reproduce"]["parallelism"]
        lay = row["layout"]
        assert par["tp_size"] * par["attention_dp_size"] == par["moe_tp_size"] * par["moe_ep_size"] == lay["gpus_per_worker"]


def test_the_best_row_s_launch_is_its_layout_in_sglang_flags(mixtral_plan):
    row = mixtral_plan.best
    lay, fig = row["layout"], row["figures"]
    launch = row["launch"]
    assert launch["expressible"] and launch["workers"] == fig["replicas"]
    argv = launch["argv"]
    assert argv[argv.index("--tp-size") + 1] == str(lay["tp"] * lay["attention_dp"])
    if lay["attention_dp"] > 1:
        assert argv[argv.index("--dp-size") + 1] == str(lay["attention_dp"]) and "--enable-dp-attention" in argv
    assert argv[argv.index("--ep-size") + 1] == str(lay["moe_ep"])


# a row written by hand: tp 2 x 4 attention replicas, experts whole over 8 GPUs, 3 workers, fp8 KV cache
_SETTINGS = {"max_num_batched_tokens": 8192, "max_num_seqs": 256, "gpu_memory_utilization": 0.85,
             "block_size": 16, "kv_cache_dtype": "fp8"}


def _row(tp, adp, moe_tp, moe_ep, framework="sglang"):
    return {"layout": {"tp": tp, "attention_dp": adp, "moe_tp": moe_tp, "moe_ep": moe_ep, "framework": framework},
            "figures": {"replicas": 3, "engine_settings": dict(_SETTINGS)}}


def test_emitted_flags_equal_the_hand_written_command_lines():
    model = "deepseek-ai/DeepSeek-V3"
    sglang = row_launch("sglang", model, _row(2, 4, 1, 8), gpus_per_node=8, is_moe=True)
    # SGLang: --tp-size is the worker's GPUs; under DP attention it divides the chunked-prefill size and the
    # running-request cap by --dp-size, so the per-replica 8192 tokens and 256 requests are given x 4
    assert sglang["command"] == ("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp-size 8 "
                                 "--dp-size 4 --enable-dp-attention --ep-size 8 --chunked-prefill-size 32768 "
                                 "--max-running-requests 1024 --mem-fraction-static 0.85 --kv-cache-dtype fp8_e4m3 "
                                 "--moe-a2a-backend deepep --deepep-mode auto")
    # (the experts spread over 8 GPUs are timed as a top-k all-to-all: SGLang's default dispatch, --moe-a2a-backend
    # none, all-reduces or all-gathers instead (docs.sglang.io, expert parallelism), so DeepEP is named)
    assert sglang["workers"] == 3
    vllm = row_launch("vllm", model, _row(2, 4, 1, 8), gpus_per_node=8, is_moe=True)
    # vLLM: one engine core per data-parallel rank, each with its own budget and cap
    assert vllm["command"] == ("vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 2 --data-parallel-size 4 "
                               "--enable-expert-parallel --max-num-batched-tokens 8192 --max-num-seqs 256 "
                               "--gpu-memory-utilization 0.85 --kv-cache-dtype fp8 "
                               "--all2all-backend deepep_high_throughput")
    # (vLLM's default all2all backend, allgather_reducescatter, gathers every token on every rank; DeepEP's
    # high-throughput kernels do the all-to-all timed: docs.vllm.ai, expert parallel deployment)
    assert "timed_on" in vllm  # the row was timed on SGLang's profile, and says so
    trtllm = row_launch("trtllm", model, _row(1, 8, 1, 8, "trtllm"), gpus_per_node=8, is_moe=True)
    assert trtllm["command"] == ("trtllm-serve deepseek-ai/DeepSeek-V3 --tp_size 8 --ep_size 8 --max_batch_size 256 "
                                 "--max_num_tokens 8192 --kv_cache_free_gpu_memory_fraction 0.85 "
                                 "--extra_llm_api_options extra_llm_api_options.yaml")
    assert trtllm["config"]["extra_llm_api_options_yaml"] == {
        "enable_attention_dp": True, "moe_tensor_parallel_size": 1, "kv_cache_config": {"dtype": "fp8"}}
    assert trtllm["config"]["llm_api_kwargs"] == {
        "tensor_parallel_size": 8, "moe_expert_parallel_size": 8, "moe_tensor_parallel_size": 1,
        "enable_attention_dp": True, "max_batch_size": 256, "max_num_tokens": 8192,
        "kv_cache_config": {"free_gpu_memory_fraction": 0.85, "dtype": "fp8"}}


def test_a_layout_an_engine_cannot_express_is_said_so_not_emitted():
    # TensorRT-LLM's attention data parallelism runs attention on one GPU per replica
    trt = row_launch("trtllm", "m", _row(2, 4, 1, 8), gpus_per_node=8, is_moe=True)
    assert not trt["expressible"] and "enable_attention_dp" in trt["reason"] and "argv" not in trt
    # vLLM splits experts either tensor-parallel or expert-parallel over all the worker's GPUs
    vllm = row_launch("vllm", "m", _row(8, 1, 2, 4), gpus_per_node=8, is_moe=True)
    assert not vllm["expressible"] and "--enable-expert-parallel" in vllm["reason"]
    # SGLang runs both
    assert row_launch("sglang", "m", _row(8, 1, 2, 4), gpus_per_node=8, is_moe=True)["expressible"]


def test_the_search_keeps_to_the_layouts_the_framework_runs():
    r = plan_inference(MIXTRAL, [GPU], TARGETS, seq_len=1024, num_tokens_to_generate=128, perf_model="calibrated",
                       framework="trtllm", max_worker_gpus=8)
    for row in r.rows:
        lay = row["layout"]
        assert lay["attention_dp"] == 1 or lay["tp"] == 1, lay


def test_disaggregated_pools_on_the_serving_model_reproduce_and_bind():
    r = plan_inference(MIXTRAL, [GPU], {"max_ttft_s": 1.0, "max_tpot_s": 0.04, "request_rate_per_s": 4.0},
                       seq_len=1024, num_tokens_to_generate=128, perf_model="calibrated", framework="sglang",
                       max_worker_gpus=8, disaggregate=True, emit_launch="sglang")
    pools = r.extra["disaggregated"]
    assert pools["rows"], pools
    best = pools["rows"][0]
    kw = dict(best["reproduce"]["serve_kwargs"])
    spec = kw.pop("disaggregated")
    disagg = {name: {"workers": p["workers"], "parallelism": ParallelismConfig(**p["parallelism"])}
              for name, p in spec.items()}
    a = LLMAnalysis(get_model_config_by_name(MIXTRAL), get_gpu_config_by_name(GPU),
                    get_dtype_config_by_name("w16a16e16"), ParallelismConfig(), **best["reproduce"]["analysis_kwargs"])
    s = a.serve(disaggregated=disagg, **kw)
    assert s["num_gpus"] == best["figures"]["num_gpus"]
    assert s["ttft_s"] <= 1.0 and s["tpot_s"] <= 0.04 and not s["saturated"]
    # one worker fewer in a pool that binds misses a target
    for entry in best["binding"]:
        if entry == "none":
            continue
        pool = entry.split(":")[0]
        fewer = {name: dict(p) for name, p in disagg.items()}
        fewer[pool]["workers"] -= 1
        t = a.serve(disaggregated=fewer, **kw)
        assert t["saturated"] or t["ttft_s"] > 1.0 or t["tpot_s"] > 0.04, entry
    launch = best["launch"]["pools"]
    assert "--disaggregation-mode" in launch["prefill"]["argv"] and "--disaggregation-mode" in launch["decode"]["argv"]
    assert launch["decode"]["workers"] == best["figures"]["decode_workers"]


@pytest.mark.parametrize("args, flag, valid", [
    (["--emit_launch", "foo", "--request_rate", "2"], "--emit_launch", "vllm, sglang, trtllm"),
    (["--emit_launch", "vllm"], "--emit_launch", "request_rate"),
])
def test_bad_emit_launch_is_one_line_naming_the_flag(args, flag, valid):
    kw = {args[i].lstrip("-"): args[i + 1] for i in range(0, len(args), 2)}
    if "request_rate" in kw:
        kw["request_rate"] = float(kw["request_rate"])
    code, text = plan_infer_command("meta-llama/Llama-3.1-8B", "h100-sxm-80gb", max_ttft=1.0, **kw)
    assert code == 2 and len(text.splitlines()) == 1
    assert text.startswith(f"error: {flag} = ") and valid in text


def test_the_launch_asked_for_is_the_engine_timed_unless_another_is_named():
    """--emit_launch sglang without --framework times the rows on SGLang's profile (the launch printed
    runs what was timed); naming --framework vllm keeps vLLM's timing and says so beside the launch."""
    kw = dict(seq_len=1024, num_tokens_to_generate=128, perf_model="roofline", max_worker_gpus=8)
    slo = {"max_ttft_s": 1.5, "max_tpot_s": 0.05, "request_rate_per_s": 2.0}
    implied = plan_inference(MIXTRAL, [GPU], slo, emit_launch="sglang", **kw)
    named = plan_inference(MIXTRAL, [GPU], slo, emit_launch="sglang", framework="vllm", **kw)
    assert implied.rows and named.rows
    assert all(r["layout"]["framework"] == "sglang" and "timed_on" not in r["launch"] for r in implied.rows)
    assert all(r["layout"]["framework"] == "vllm" and "vllm" in r["launch"]["timed_on"] for r in named.rows)
    # without either, vLLM as before
    plain = plan_inference(MIXTRAL, [GPU], slo, **kw)
    assert all(r["layout"]["framework"] == "vllm" for r in plain.rows)


# ---------------------------------------------------------------- a rack-wide worker (GB200 / GB300 NVL72)

def _search(model, gpu, **limits):
    from llm_analysis.planner.inference import make_search
    return make_search(model, [gpu], ("w16a16e16",), None, False, None, limits.get("max_gpus"), None, 8,
                       limits.get("max_ep"), 1024, None, None, None)


def test_an_nvl72_rack_adds_its_whole_domain_worker_with_the_copies_that_split_the_experts():
    """GB200 NVL72: the NVLink domain is 72 GPUs (4 a tray): beside the doubling sweep (up to 64 GPUs) the MoE
    search holds one worker of all 72, attention replicas of one GPU, experts whole; Qwen3-30B-A3B's 128
    experts over 72 GPUs need 16 copies (144 slots, 2 a GPU: the least r with (128 + r) % 72 == 0)."""
    from llm_analysis.planner.layouts import workers_of
    rack = [w for w in workers_of(_search("Qwen/Qwen3-30B-A3B", "gb200"), "sglang", None) if w.gpus == 72]
    assert len(rack) == 1
    w = rack[0]
    assert (w.tp, w.attention_dp, w.moe_tp, w.moe_ep) == (1, 72, 1, 72)
    assert (w.redundant_experts, w.expert_slots) == (16, 144)
    assert w.parallelism_fields(2)["moe_redundant_experts"] == 16
    # a node-sized NVLink domain adds none, and the limits exclude it
    assert not [w for w in workers_of(_search("Qwen/Qwen3-30B-A3B", "b200"), "sglang", None) if w.gpus > 64]
    for limits, max_worker_gpus in (({"max_gpus": 64}, None), ({"max_ep": 64}, None), ({}, 64)):
        assert not [w for w in workers_of(_search("Qwen/Qwen3-30B-A3B", "gb200", **limits), "sglang",
                                          max_worker_gpus) if w.gpus == 72]


def test_the_rack_worker_s_serve_call_serves_its_copies(analysis_builder):
    """The rack worker's ParallelismConfig fields are a layout serve() runs: 72 GPUs holding 2 expert slots each."""
    from llm_analysis.planner.layouts import workers_of
    w = [w for w in workers_of(_search("Qwen/Qwen3-30B-A3B", "gb200"), "trtllm", None) if w.gpus == 72][0]
    s = analysis_builder("Qwen/Qwen3-30B-A3B", gpu="gb200", **w.parallelism_fields(1)).serve(
        concurrency=256, input_len=1024, output_len=128, framework="trtllm", num_requests=0)
    assert s["num_gpus"] == 72 and s["moe_redundant_experts"] == 16


def test_launch_lines_set_each_engine_s_expert_copies():
    """256 experts and 32 copies over 72 GPUs: vLLM's EPLB config, SGLang's --ep-num-redundant-experts and
    TensorRT-LLM's load-balancer slots (experts + copies = 288)."""
    row = _row(1, 72, 1, 72)
    row["layout"].update(moe_redundant_experts=32, moe_expert_slots=288)
    vllm = row_launch("vllm", "deepseek-ai/DeepSeek-R1", row, gpus_per_node=4, is_moe=True)["argv"]
    assert "--enable-eplb" in vllm and vllm[vllm.index("--eplb-config") + 1] == '{"num_redundant_experts":32}'
    sglang = row_launch("sglang", "deepseek-ai/DeepSeek-R1", row, gpus_per_node=4, is_moe=True)["argv"]
    assert sglang[sglang.index("--ep-num-redundant-experts") + 1] == "32"
    trt_row = _row(1, 72, 1, 72, "trtllm")
    trt_row["layout"].update(moe_redundant_experts=32, moe_expert_slots=288)
    trt = row_launch("trtllm", "deepseek-ai/DeepSeek-R1", trt_row, gpus_per_node=4, is_moe=True)["config"]
    assert trt["extra_llm_api_options_yaml"]["moe_config"] == {"load_balancer": {"num_slots": 288}}
    assert trt["llm_api_kwargs"]["moe_config"] == {"load_balancer": {"num_slots": 288}}
    # without copies, none of these flags
    plain = row_launch("sglang", "deepseek-ai/DeepSeek-R1", _row(1, 8, 1, 8), gpus_per_node=8, is_moe=True)["argv"]
    assert "--ep-num-redundant-experts" not in plain


def test_the_command_line_bounds_tp_ep_and_pp_as_docs_planner_says():
    """docs/planner.md: `--max_tp` and `--max_ep` bound tp and moe_ep; the command line had no such flags (exit 2,
    'unknown flag --max_tp'). Every row keeps within them; plan train takes --max_tp and --max_pp."""
    import json
    import subprocess
    import sys
    run = subprocess.run([sys.executable, "-m", "llm_analysis", "plan", "infer", "Qwen/Qwen3-30B-A3B", "h100-sxm-80gb",
                          "--request_rate", "4", "--max_tp", "2", "--max_ep", "2", "--output_format", "json"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-1500:]
    rows = json.loads(run.stdout)["rows"]
    assert rows and all(r["layout"]["tp"] <= 2 and (r["layout"]["moe_ep"] or 1) <= 2 for r in rows)
    run = subprocess.run([sys.executable, "-m", "llm_analysis", "plan", "train", "meta-llama/Llama-3.1-8B",
                          "h100-sxm-80gb", "1e12", "64", "512", "4096", "--max_tp", "2", "--max_pp", "1",
                          "--output_format", "json"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-1500:]
    rows = json.loads(run.stdout)["rows"]
    assert rows and all(r["layout"]["tp"] <= 2 and r["layout"]["pp"] == 1 for r in rows)


def _row_of(dtype, framework="vllm"):
    row = _row(8, 1, 8, 1, framework)
    row["layout"]["dtype"] = dtype
    return row


def test_a_launch_runs_the_weights_the_row_was_timed_with():
    # The engines load a checkpoint's weights as stored (its quantization_config decides). fp8 from a 16-bit
    # checkpoint is quantised at load by vLLM and SGLang with --quantization fp8 (docs.vllm.ai
    # features/quantization/fp8: "dynamic"; SGLang's --quantization fp8); TensorRT-LLM's PyTorch backend serves
    # fp8 only from a quantised checkpoint, so that pair is refused, as is 16-bit timing of a quantised release.
    fp8_on_bf16 = {e: row_launch(e, "m", _row_of("fp8", e), gpus_per_node=8, is_moe=False) for e in LAUNCH_ENGINES}
    for engine in ("vllm", "sglang"):
        argv = fp8_on_bf16[engine]["argv"]
        assert argv[argv.index("--quantization") + 1] == "fp8"
    assert not fp8_on_bf16["trtllm"]["expressible"] and "fp8" in fp8_on_bf16["trtllm"]["reason"]
    # gpt-oss ships MXFP4 weights: a row timed at 16 bits is not what `vllm serve openai/gpt-oss-120b` runs
    bf16_on_mxfp4 = row_launch("vllm", "m", _row_of("w16a16e16"), gpus_per_node=8, is_moe=False,
                               checkpoint_weights="mxfp4")
    assert not bf16_on_mxfp4["expressible"] and "--dtype_names fp4" in bf16_on_mxfp4["reason"]
    # timed as stored: no flag, nothing refused
    same = row_launch("vllm", "m", _row_of("w4a16e16-mxfp4"), gpus_per_node=8, is_moe=False,
                      checkpoint_weights="mxfp4")
    assert same["expressible"] and "--quantization" not in same["argv"]
    bf16 = row_launch("sglang", "m", _row_of("w16a16e16", "sglang"), gpus_per_node=8, is_moe=False)
    assert bf16["expressible"] and "--quantization" not in bf16["argv"]
    # an int4 (AWQ) row: no catalogue release stores it, whatever the engine
    awq = row_launch("vllm", "m", _row_of("awq"), gpus_per_node=8, is_moe=False)
    assert not awq["expressible"] and "int4" in awq["reason"]


def test_the_planner_reads_the_checkpoint_the_launch_names():
    # openai/gpt-oss-20b's catalogue entry states its MXFP4 release (checkpoint_weight_format): planned at a
    # 16-bit data type, the emitted vLLM command would load MXFP4 weights, so it is not emitted; planned as
    # released (the default, "checkpoint") it is
    slo = {"max_tpot_s": 0.05, "request_rate_per_s": 2}
    plan = plan_inference("openai/gpt-oss-20b", ["h100-sxm-80gb"], slo, seq_len=1024, num_tokens_to_generate=128,
                          emit_launch="vllm", max_gpus=8, dtypes=["w16a16e16"])
    assert not plan.best["launch"]["expressible"] and "mxfp4" in plan.best["launch"]["reason"]
    released = plan_inference("openai/gpt-oss-20b", ["h100-sxm-80gb"], slo, seq_len=1024, num_tokens_to_generate=128,
                              emit_launch="vllm", max_gpus=8)
    assert released.best["layout"]["dtype"] == "w4a16e16-mxfp4" and released.best["launch"]["expressible"]
