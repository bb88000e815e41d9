"""The phase tables (model/phase_table.py) reproduce the operators the builders
produce, at shapes far from the probes, and are refused where the figures are not
polynomials of the shape (routed experts, sliding windows)."""

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_gpu_config_by_name, get_model_config_by_name
from llm_analysis.model.phase_table import BYTES_PER_GPU, FIELDS, FLOPS_PER_GPU, phase_of, phase_table


def _analysis(name, **par):
    return LLMAnalysis(get_model_config_by_name(name), get_gpu_config_by_name("h100-sxm-80gb"),
                       parallelism_config=ParallelismConfig(**par))


@pytest.mark.parametrize("name,par", [("facebook_opt-1.3b", dict(tp_size=2)),
                                      ("meta-llama_Llama-3.1-8B", dict(tp_size=4, pp_size=2)),
                                      # middle stages share their table (phase_table._same_stage)
                                      ("meta-llama_Llama-3.1-8B", dict(pp_size=4)),
                                      ("bert-base-uncased", {})])
@pytest.mark.parametrize("phase", ["prefill", "decode", "train"])
def test_table_matches_built_operators(name, par, phase):
    d = _analysis(name, **par).describer
    for stage in [None] + list(range(d.par.pp_size)):
        table = phase_table(d, phase, stage)
        assert table is not None
        shapes = [(1, 5), (5, 333), (64, 8191), (13, 100_001)]
        for b, x in shapes:
            weighted = [(p.repeat, o) for p in d.build_model_parts(phase_of(phase, b, x), stage) for o in p.ops]
            for f, field in enumerate(FIELDS):
                want = [getattr(o, field) for _, o in weighted]
                assert table.evaluate(b, x, f) == pytest.approx(want, rel=1e-12, abs=0), (field, b, x)
                # summed over the phase with each operator's repeat count, and the largest of one operator
                total = sum(n * getattr(o, field) for n, o in weighted)
                assert table.total(b, x, f) == pytest.approx(total, rel=1e-12, abs=0), (field, b, x)
                assert table.largest(b, x, f) == pytest.approx(max(want, default=0.0), rel=1e-12, abs=0)
        for b in (1, 7):
            for _, x in shapes:
                # the kernels whose work grows with x: those whose FLOPs or bytes differ between lengths
                figures, other = table.figures(b, x), table.figures(b, x + 1000)
                assert table.growing == [i for i, op in enumerate(table.ops) if op.kind != "collective" and any(
                    figures[f][i] != other[f][i] for f in (FLOPS_PER_GPU, BYTES_PER_GPU))]
                for i in table.growing:
                    assert table.operator_figures(i, b, x) == pytest.approx([f[i] for f in figures], rel=1e-12, abs=0)


@pytest.mark.parametrize("name", ["mistralai_Mixtral-8x7B-v0.1", "google_gemma-2-9b"])
def test_no_table_where_figures_are_not_polynomials(name):
    assert phase_table(_analysis(name).describer, "prefill") is None


@pytest.mark.parametrize("name,dtype,par", [("meta-llama_Llama-3.1-70B", "w16a16e16", dict(tp_size=8)),
                                            ("google_gemma-2-9b", "w4a16e16", dict(tp_size=2)),  # above the window
                                            ("facebook_opt-1.3b", "fp8", {})])
def test_array_fit_is_the_exact_fit(name, dtype, par, monkeypatch):
    """The probes' whole-number figures fitted in one array pass give the coefficients the exact
    (fraction) arithmetic gives, bit for bit."""
    import llm_analysis.model.phase_table as phase_table_module
    from llm_analysis.config import get_dtype_config_by_name
    from llm_analysis.model.describer import LayerDescriber

    def describer():
        return LayerDescriber(get_model_config_by_name(name), get_dtype_config_by_name(dtype), ParallelismConfig(**par))
    for phase in ("prefill", "decode", "train"):
        x = 5000 if get_model_config_by_name(name).sliding_window else 100
        fitted = phase_table(describer(), phase, x=x)
        with monkeypatch.context() as m:
            m.setattr(phase_table_module, "_whole_coefficients", lambda *a: None)
            exact = phase_table(describer(), phase, x=x)
        assert fitted is not None and fitted.coefs == exact.coefs
