

def test_interleaved_virtual_stages_divide_each_stage():
    """Megatron-LM splits each pipeline stage's layers into pipeline_interleave equal virtual stages ('number of
    layers per pipeline stage must be divisible by number of layers per virtual pipeline stage'): Llama-2-7B's
    32 layers over 4 stages hold 8 each, which 3 chunks do not split (the bubble had been taken as a third of
    v = 1's, silently); 2, 4 and 8 do."""
    import pytest
    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import ParallelismConfig
    from llm_analysis.errors import ConfigError
    a = LLMAnalysis("NousResearch_Llama-2-7b-hf", "a100-sxm-80gb", parallelism_config=ParallelismConfig(pp_size=4, tp_size=2))
    kw = dict(batch_size_per_gpu=1, gradient_accumulation_steps=8, seq_len=4096)
    with pytest.raises(ConfigError, match=r"pipeline_interleave = 3 .* \[8\] layers .* valid \[1, 2, 4, 8\]"):
        a.training(pipeline_interleave=3, **kw)
    assert a.training(pipeline_interleave=4, **kw)["latency_per_iter"] > 0


def test_a_run_shorter_than_one_iteration_says_so():
    """1,000 tokens against one iteration's 16 x 4,096 = 65,536: the whole run's figures are 1,000 / 65,536 =
    0.0153 of an iteration's (the mirrored system's fraction), which the notes say, since no run takes less
    than one whole iteration."""
    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import ParallelismConfig
    a = LLMAnalysis("NousResearch_Llama-2-7b-hf", "h100-sxm-80gb", parallelism_config=ParallelismConfig(dp_size=8))
    s = a.training(global_batch_size=16, seq_len=4096, total_num_tokens=1000, ds_zero=3)
    assert abs(s["num_iterations"] - 1000 / 65536) < 1e-12
    assert any("0.0153 of one iteration" in n and "at least one whole iteration" in n for n in s["notes"])
