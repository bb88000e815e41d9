"""The families' registry and typed records (llm_analysis/exact/architectures/).

Torch-free except the last test: the registry is keyed by transformers class names, so a
name that transformers does not define (misspelt, or renamed by a new release) would
silently turn its family's rule off; the records a description holds must come back from
the cache's JSON as they were.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from llm_analysis.exact.architectures import REGISTRY, RECORD_TYPES, decode_description, encode_description
from llm_analysis.exact.architectures.bailing_hybrid import KimiDeltaRule
from llm_analysis.exact.architectures.deepseek_v4 import CompressedKeys
from llm_analysis.exact.architectures.funnel import PooledAttention, PoolingOptions, PoolStage, RelativeAttention
from llm_analysis.exact.architectures.llama_chunked_attention import ChunkedLocal
from llm_analysis.exact.architectures.longformer import SlidingChunks
from llm_analysis.exact.architectures.minimax import LightningAttention
from llm_analysis.exact.architectures.perceiver import FixedRows, InputTokens, LatentAttention
from llm_analysis.exact.architectures.recurrent_state import (CausalConvOutputs, RecurrentState, ShortConvolution,
                                                              StatePart)
from llm_analysis.exact.architectures.xlstm import MlstmCell
from llm_analysis.exact.architectures.zamba import Mamba2Scan, MambaScan
from llm_analysis.exact.architectures.zaya import SequenceStartRows


def test_the_families_import_without_torch():
    # a cached description is read and analysed torch-free: every family module imports
    # torch (and transformers) only inside the functions that read live modules
    root = Path(__file__).resolve().parents[2]
    code = ("import sys, pkgutil, importlib\n"
            "import llm_analysis.exact.architectures as families, llm_analysis.exact.tree_describer\n"
            "for m in pkgutil.iter_modules(families.__path__):\n"
            "    importlib.import_module(f'llm_analysis.exact.architectures.{m.name}')\n"
            "print(sorted(n for n in ('torch', 'transformers') if n in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=root,
                         env=dict(os.environ, PYTHONPATH=str(root)))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_every_registered_class_is_defined_in_transformers():
    transformers = pytest.importorskip("transformers")
    models = Path(transformers.__file__).parent / "models"
    defined = set()
    for source in models.glob("*/modeling_*.py"):
        defined.update(re.findall(r"^\s*class (\w+)\(", source.read_text(encoding="utf-8"), re.MULTILINE))
    assert sorted(name for name in REGISTRY if name not in defined) == []


# one record of every type, written out by hand (the expected values of the round trip)
SAMPLES = [
    PoolStage(2), FixedRows(8), InputTokens(), SequenceStartRows(),
    PoolingOptions(separate_cls=True, truncate_seq=False, pool_q_only=True, attention=RelativeAttention.FACTORIZED),
    PooledAttention(block=1, q_stage=1, kv_stage=0, d_model=64, segments=2),
    LatentAttention(queries=FixedRows(8), keys=InputTokens()),
    CompressedKeys(rate=4, topk=512, only=False, entry_elems=64, buffer_elems=256, overlap_elems=512),
    SlidingChunks(one_sided_window=4), ChunkedLocal(chunk=8192),
    RecurrentState(parts=(StatePart("C", 4 * 16 * 32, False), StatePart("m", 4, True)), source="a paper",
                   decode_refusal="why", recurrence=MlstmCell(4, 16, 32, 16, 48, "why")),
    CausalConvOutputs(pad_outputs=3, decode_outputs=0), ShortConvolution(channels=64, kernel=4),
    KimiDeltaRule(channels=96, kernel=4, heads=2, head_dim=16, chunk=64), LightningAttention(2, 16, 256),
    MambaScan(channels=64, state_size=16, kernel=4), Mamba2Scan(64, 4, 2, 16, 16, 128),
]


def test_every_record_type_has_a_sample():
    # records nested in others (a state's parts and recurrence, the options' enum) count
    sampled = set(re.findall(r'"record": "(\w+)"', json.dumps(encode_description({"samples": SAMPLES}))))
    assert sampled == set(RECORD_TYPES)


def test_records_come_back_from_the_cache_json_as_they_were():
    desc = {"kinds": [[{"name": "attention", "op": "attention", "variant": r} for r in SAMPLES]],
            "pooling": SAMPLES[4], "layers": [[0, True]]}
    text = json.dumps(encode_description(desc), sort_keys=True)  # what cache.store writes
    assert decode_description(json.loads(text)) == desc


def test_a_derived_description_survives_the_cache():
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from llm_analysis.exact.derive import derive_description
    cfg = transformers.AutoConfig.for_model("funnel", d_model=64, n_head=4, d_head=16, d_inner=128, vocab_size=1000,
                                            block_sizes=[1, 2, 1], num_decoder_layers=1)
    desc = derive_description(cfg, "funnel")
    assert isinstance(desc["pooling"], PoolingOptions)
    assert decode_description(json.loads(json.dumps(encode_description(desc)))) == desc
