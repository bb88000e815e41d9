"""The phase tables (operators/phase_table.py) reproduce the operators the builders
produce, at shapes far from the probes, and are refused where the figures are not
polynomials of the shape (routed experts, sliding windows)."""

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_gpu_config_by_name, get_model_config_by_name
from llm_analysis.model.phase_table import FIELDS, phase_of, phase_table


def _analysis(name, **par):
    return LLMAnalysis(get_model_config_by_name(name), get_gpu_config_by_name("h100-sxm-80gb"),
                       parallelism_config=ParallelismConfig(**par))


@pytest.mark.parametrize("name,par", [("facebook_opt-1.3b", dict(tp_size=2)),
                                      ("meta-llama_Llama-3.1-8B", dict(tp_size=4, pp_size=2)),
                                      ("bert-base-uncased", {})])
@pytest.mark.parametrize("phase", ["prefill", "decode", "train"])
def test_table_matches_built_operators(name, par, phase):
    d = _analysis(name, **par).describer
    for stage in [None] + list(range(d.par.pp_size)):
        table = phase_table(d, phase, stage)
        assert table is not None
        for b, x in [(1, 5), (5, 333), (64, 8191), (13, 100_001)]:
            ops = [o for p in d.build_model_parts(phase_of(phase, b, x), stage) for o in p.ops]
            for f, field in enumerate(FIELDS):
                want = [getattr(o, field) for o in ops]
                assert table.evaluate(b, x, f) == pytest.approx(want, rel=1e-12, abs=0), (field, b, x)


@pytest.mark.parametrize("name", ["mistralai_Mixtral-8x7B-v0.1", "google_gemma-2-9b"])
def test_no_table_where_figures_are_not_polynomials(name):
    assert phase_table(_analysis(name).describer, "prefill") is None
