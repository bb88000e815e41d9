"""SGLang's admission reads the running requests' remaining outputs, each up to the clip, at every
admitted request (serving/simulation.py `_Replica._remaining_sum`). The simulation keeps that sum as
requests come and go instead of re-summing thousands of running requests each time; this test checks the
kept sum, at every admission of a loaded SGLang run with outputs beyond the clip and preemptions, against
the sum written out from its definition."""

from __future__ import annotations

from llm_analysis.serving import simulation
from llm_analysis.serving.rank import build_rank
from llm_analysis.serving.workload import make_workload


def _written_out(rep, clip: int) -> int:
    """The definition: each running request's output still to come (a decoder's finish tick less the
    ticks; a prefilling request's output less what it generated), counted up to `clip`."""
    return sum(min(q.finish_tick - rep.ticks if q.finish_tick >= 0 else q.output - q.generated, clip)
               for q in rep.running.values())


def test_kept_sum_equals_the_written_out_sum(monkeypatch):
    from builders import build_analysis
    a = build_analysis("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb", perf_model="calibrated")
    a = a.with_conventions(a.conventions_named(None))  # as serve() runs it
    # outputs of 512 to 8,192 tokens against SGLang's clip (4,096): some decoders beyond it, some within
    lengths = make_workload(a.model_config, 64, None, 1024, {"mean": 3000, "spread": 2500}, None).lengths
    replica, _ = build_rank(a, a.parallelism_config, "sglang",
                            {"num_requests": 400, "gpu_memory_utilization": 0.3}, lengths)
    kept = simulation._Replica._remaining_sum
    checked = []

    def compare(rep, clip):
        out = kept(rep, clip)
        if not rep.outputs_unclipped:
            assert out == _written_out(rep, clip), (rep.ticks, out, _written_out(rep, clip))
            checked.append(out)
        return out

    monkeypatch.setattr(simulation._Replica, "_remaining_sum", compare)
    replica.simulate(concurrency=64, seed=3)
    assert len(checked) > 100 and max(checked) > 0  # the rule was exercised, under load
