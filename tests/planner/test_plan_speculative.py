"""`plan infer` with speculative decoding (issue 26 item 3 in the planner): every fleet's serve() call decodes
with it, each row reproduces it, and `--emit_launch` writes each engine's own speculative settings."""

from __future__ import annotations

import json

import pytest

from llm_analysis.cli.plan import plan_infer_command
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
from llm_analysis.errors import ConfigError
from llm_analysis.facade import LLMAnalysis
from llm_analysis.planner import plan_inference
from llm_analysis.planner.launch import WorkerLaunch, pool_launch

MODEL, GPU = "meta-llama/Llama-3.1-8B", "h100-sxm-80gb"
MTP = {"method": "mtp", "draft_length": 3, "mean_accepted_length": 2.5}
SLO = {"max_tpot_s": 0.02, "concurrency": 16}


def _fleet(row):
    rep = row["reproduce"]
    return LLMAnalysis(get_model_config_by_name(rep["model_name"]), get_gpu_config_by_name(rep["gpu_name"]),
                       get_dtype_config_by_name(rep["dtype_name"]), ParallelismConfig(**rep["parallelism"]),
                       **rep["analysis_kwargs"])


def test_every_fleet_decodes_speculatively_and_rows_reproduce_it():
    r = plan_inference(MODEL, [GPU], SLO, seq_len=512, num_tokens_to_generate=256, speculative=MTP)
    best = r.best
    kw = best["reproduce"]["serve_kwargs"]
    assert kw["speculative"] == MTP and "speculative={'method': 'mtp'" in best["reproduce"]["serve_call"]
    a = _fleet(best)
    s = a.serve(**kw)
    assert s["tpot_s"] == best["figures"]["tpot_s"] and s["speculative_mean_accepted_length"] == 2.5
    # the same fleet without speculation: a step emits one token per request instead of 2.5, so at 16
    # clients (memory-bound decode steps, the draft one layer of 32) the time per output token is longer
    plain = a.serve(**{k: v for k, v in kw.items() if k != "speculative"})
    assert plain["tpot_s"] > 1.5 * s["tpot_s"]


def test_speculative_decoding_is_checked_once_and_needs_a_load():
    with pytest.raises(ConfigError) as e:
        plan_inference(MODEL, [GPU], SLO, speculative={**MTP, "draft_len": 3})
    assert str(e.value).startswith("speculative key 'draft_len' is not known")
    with pytest.raises(ConfigError) as e:
        plan_inference(MODEL, [GPU], SLO, speculative={**MTP, "mean_accepted_length": 4})
    assert str(e.value).startswith("speculative['mean_accepted_length'] = 4")
    with pytest.raises(ConfigError) as e:
        plan_inference(MODEL, [GPU], {"max_tpot_s": 0.02}, speculative=MTP)
    assert str(e.value).startswith("speculative = ") and "give a load" in str(e.value)


@pytest.mark.parametrize("engine, flags", [
    # k = 3 tokens verified per step: the last accepted one and k - 1 = 2 drafted after it
    ("vllm", ["--speculative-config", '{"method":"mtp","num_speculative_tokens":2}']),
    ("sglang", ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "2", "--speculative-eagle-topk", "1",
                "--speculative-num-draft-tokens", "3"]),
])
def test_launch_carries_the_engines_speculative_flags(engine, flags):
    code, text = plan_infer_command(MODEL, GPU, seq_len=512, num_tokens_to_generate=256, max_tpot="20ms",
                                    concurrency=16, speculative=json.dumps(MTP), emit_launch=engine,
                                    output_format="json")
    assert code == 0, text
    argv = json.loads(text)["rows"][0]["launch"]["argv"]
    start = argv.index(flags[0])
    assert argv[start:start + len(flags)] == flags


def test_trtllm_launch_names_the_options_file_once_with_its_speculative_config():
    w = WorkerLaunch(tp=1, attention_dp=1, moe_tp=1, moe_ep=1, is_moe=False, workers=1, gpus_per_node=8,
                     max_num_batched_tokens=8192, max_num_seqs=256, memory_share=0.9, kv_cache_dtype="auto")
    out = pool_launch("trtllm", MODEL, w, speculative=MTP)
    assert out["argv"].count("--extra_llm_api_options") == 1
    assert out["config"]["extra_llm_api_options_yaml"]["speculative_config"] == {
        "decoding_type": "MTP", "num_nextn_predict_layers": 2}
    draft = pool_launch("trtllm", MODEL, w, speculative={"method": "draft_model", "draft_length": 4,
                                                         "acceptance_rate": 0.7,
                                                         "draft_model": "meta-llama/Llama-3.2-1B"})
    assert draft["config"]["llm_api_kwargs"]["speculative_config"] == {
        "decoding_type": "DraftTarget", "max_draft_len": 3, "speculative_model_dir": "meta-llama/Llama-3.2-1B"}
    # a disaggregated prefill pool does not decode: no speculative settings there, the decode pool has them
    assert "--speculative-config" not in pool_launch("vllm", MODEL, w, "prefill", MTP)["argv"]
    assert "--speculative-config" in pool_launch("vllm", MODEL, w, "decode", MTP)["argv"]
    assert "--speculative-config" not in pool_launch("vllm", MODEL, w)["argv"]
