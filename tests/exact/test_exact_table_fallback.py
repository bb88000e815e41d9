"""The exact path's fallback (llm_analysis/exact/entry.py): when the module tree cannot be
derived (a state-space mixer), the family table's description is used only if it verifies
against the same transformers model; otherwise the call refuses, naming both reasons.

Expected values come from the transformers model built here on the meta device: its
parameters (named_parameters, tied weights once) and FlopCounterMode's count of one
prefill (batch 1, 16 tokens).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from llm_analysis.config import get_gpu_config_by_name  # noqa: E402
from llm_analysis.errors import UnsupportedArchitectureError  # noqa: E402
from llm_analysis.exact import analysis_from_hf  # noqa: E402
from llm_analysis.exact.compare import engine_matmul_flops  # noqa: E402
from llm_analysis.facade import LLMAnalysis  # noqa: E402

GPU = get_gpu_config_by_name("a100-sxm-80gb")
MAMBA2 = {"model_type": "mamba2", "hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 256, "state_size": 16,
          "num_heads": 8, "head_dim": 16, "n_groups": 2, "expand": 2, "conv_kernel": 4, "chunk_size": 8,
          "tie_word_embeddings": False}


pytestmark = pytest.mark.usefixtures("exact_cache")  # tests/conftest.py


def _meta_model(cfg):
    config = transformers.AutoConfig.for_model(**cfg)
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(config)


def test_mixer_model_gets_the_verified_table_description():
    model = _meta_model(MAMBA2)
    params = sum(p.numel() for p in model.parameters())  # parameters() yields a tied weight once
    from torch.utils.flop_counter import FlopCounterMode
    ids = torch.zeros((1, 16), dtype=torch.long, device="meta")
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(input_ids=ids, use_cache=False)
    a = analysis_from_hf(dict(MAMBA2), GPU)
    assert type(a) is LLMAnalysis  # the table's analysis, not a module-tree subclass
    assert a.get_num_params_total() == params
    assert engine_matmul_flops(a, 1, 16) == counter.get_total_flops()


def test_refused_by_both_paths_names_both_reasons():
    # xLSTM: neither the module tree (an mLSTM mixer it does not know) nor a family row describes it
    cfg = {"model_type": "xlstm", "hidden_size": 64, "embedding_dim": 64, "num_hidden_layers": 2, "num_blocks": 2,
           "num_heads": 2, "vocab_size": 256}
    with pytest.raises(UnsupportedArchitectureError, match="family table does not describe it exactly either") as err:
        analysis_from_hf(cfg, GPU)
    assert "\n" not in str(err.value)  # one line: the command line's errors are one line
