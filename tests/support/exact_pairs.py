"""(our count, the real model's count) pairs for the exact-path tests: parameters and
prefill matmul FLOPs of `analysis_from_hf(cfg)` beside `architecture_truth(cfg)`, the
transformers model on the meta device counted with FlopCounterMode (needs torch)."""

from llm_analysis.exact import analysis_from_hf
from llm_analysis.exact.compare import engine_matmul_flops
from llm_analysis.exact.truth import architecture_truth


def exact_and_truth(cfg, gpu):
    """((params, FLOPs) derived, (params, FLOPs) of the real model, the analysis)."""
    truth = architecture_truth(cfg)
    a = analysis_from_hf(cfg, gpu)
    phase = truth["phase"]
    return (a.get_num_params_total(), engine_matmul_flops(a, phase["batch_size"], phase["seq_len"])), \
        (truth["params"]["total"], truth["flops"]["total"]), a
