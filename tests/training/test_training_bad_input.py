

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
