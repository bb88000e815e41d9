"""`plan train` searches the pipeline sizes that divide a model's layers only with the embedding's and the loss's
slots (Megatron-Core's account_for_embedding/loss_in_pipeline_split, model/pipeline_layout.py).

Hand derivation: Llama 3.1 405B has 126 layers (its config.json, num_hidden_layers). 126 = 2 x 3^2 x 7, so no
power of two above 2 divides it; 126 + 2 = 128 = 2^7, so 4, 8, 16, 32 and 64 stages split the slots, with 32, 16,
8, 4 and 2 slots a stage (each end stage keeps a layer). Meta trained it over 16 stages as 7, 8 x 14, 7 (arXiv
2407.21783 §3.3.2) and NeMo's recipes over 8 x 8 virtual stages: both are such splits.
"""

from __future__ import annotations

from llm_analysis.config import ParallelismConfig, get_model_config_by_name
from llm_analysis.facade import LLMAnalysis
from llm_analysis.planner.space import accounted_pp_options, interleave_options
from llm_analysis.planner.training import plan_training

L405 = "meta-llama/Llama-3.1-405B"


def test_the_stage_counts_the_slots_divide():
    m = get_model_config_by_name(L405)
    assert accounted_pp_options(m, 64) == [4, 8, 16, 32, 64]
    assert accounted_pp_options(m, 8) == [4, 8]
    # 80 layers (Llama 3.1 70B): every divisor of 82 = 2 x 41 within 16 also divides 80, or is 41: none to add
    assert accounted_pp_options(get_model_config_by_name("meta-llama/Llama-3.1-70B"), 16) == []
    # virtual stages split the 16 slots of a stage of pp 8, not its 15 or 16 layers
    assert interleave_options(m, 8, 16, end_slots=2) == [1, 2, 4, 8, 16]
    assert interleave_options(m, 8, 16) == [1]


def test_the_plan_runs_405b_over_the_accounted_stages_and_each_row_reproduces():
    result = plan_training(L405, ["h100-sxm-80gb"], 1e12, 2048, 512, 8192, dtypes=["bf16"], max_pp=16)
    accounted = [r for r in result.rows if r["layout"].get("accounted_pipeline_split")]
    assert accounted, "no layout over the embedding and loss slots was ranked"
    assert all(r["layout"]["pp"] in (4, 8, 16) for r in accounted)
    row = accounted[0]
    rep = row["reproduce"]
    assert rep["parallelism"]["account_for_embedding_in_pipeline_split"] is True
    s = LLMAnalysis(rep["model_name"], rep["gpu_name"], rep["dtype_name"], ParallelismConfig(**rep["parallelism"]),
                    **rep["analysis_kwargs"]).training(**rep["training_kwargs"])
    assert s["latency_per_iter"] == row["figures"]["latency_per_iter"]
    assert "+el" in result.table()
