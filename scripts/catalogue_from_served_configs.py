"""Write a catalogue entry (llm_analysis/model_configs/<org>_<name>.json) for every served model whose real
config.json is in tests/data/hf_configs_aiconfigurator/ (SOURCES.md there: copied from ai-dynamo/aiconfigurator,
Apache-2.0) and that the Hub import maps without refusal, so that `--model_name Qwen/Qwen3-32B-FP8` (or any
other of them) resolves offline, to exactly what the Hub import gives online for that config.json.

Entries already in the catalogue are left as they are. A config the import refuses (a feature not modelled)
gets no entry: the name then fails as any unknown name does, with the Hub's answer when it can be reached.

    python scripts/catalogue_from_served_configs.py [--check]

--check writes nothing and exits 1 when an entry is missing or differs from what the import gives now
(tests/catalogue/test_served_model_entries.py runs the same comparison).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llm_analysis.catalogue.lookup import MODEL_CONFIGS_DIR  # noqa: E402
from llm_analysis.errors import LLMAnalysisError  # noqa: E402
from llm_analysis.hub.entry import model_config_from_hf_dict  # noqa: E402
from llm_analysis.hub.mapping import checkpoint_weight_format  # noqa: E402
from llm_analysis.hub.quantization import with_modelopt_sidecar  # noqa: E402

RAW = ROOT / "tests" / "data" / "hf_configs_aiconfigurator"
# a ModelOpt release's hf_quant_config.json, where its config.json states no quantization_config (SOURCES.md)
QUANT = RAW / "hf_quant_config"
MARK = "scripts/catalogue_from_served_configs.py"  # in the source of every entry this script writes


def hub_id(stem: str) -> str:
    """The Hub repository a raw file describes: its stem with the first '_' as '/' (SOURCES.md)."""
    org, _, name = stem.partition("_")
    return f"{org}/{name}"


def source_of(stem: str) -> str:
    org, _, name = stem.partition("_")
    quant = (f"; its weight format (checkpoint_weight_format) from its hf_quant_config.json (aiconfigurator's "
             f"{org}--{name}_hf_quant_config.json; the repository's copy: "
             f"tests/data/hf_configs_aiconfigurator/hf_quant_config/{stem}.json)") \
        if (QUANT / f"{stem}.json").exists() else ""
    return (f"Hugging Face Hub config.json of {hub_id(stem)} (copied in ai-dynamo/aiconfigurator (Apache-2.0) "
            f"commit 095f58a, aic-core/src/aiconfigurator_core/model_configs/{org}--{name}_config.json; the "
            f"repository's copy: tests/data/hf_configs_aiconfigurator/{stem}.json), mapped by llm_analysis.hub as "
            "the Hub import maps it online (" + MARK + ")" + quant)


def with_hf_quant_config(raw: dict, stem: str) -> dict:
    """`raw` with the quantization its hf_quant_config.json states, where its config.json states none
    (hub/quantization.py `with_modelopt_sidecar`, as a local model directory is read)."""
    path = QUANT / f"{stem}.json"
    return with_modelopt_sidecar(raw, json.loads(path.read_text())) if path.exists() else raw


def entries() -> dict:
    """stem -> the catalogue JSON the import gives (None where it refuses)."""
    out = {}
    for path in sorted(RAW.glob("*.json")):
        stem = path.stem
        existing = MODEL_CONFIGS_DIR / f"{stem}.json"
        if existing.exists() and MARK not in json.loads(existing.read_text()).get("source", ""):
            continue  # an entry written another way (by hand, with its own tests): left as it is
        raw = json.loads(path.read_text())  # Python's json reads Infinity / NaN, as transformers does
        try:
            cfg = model_config_from_hf_dict(raw, name=stem, source=source_of(stem), what=f"config.json of {hub_id(stem)}")
        except LLMAnalysisError:
            out[stem] = None
            continue
        # the shapes are config.json's; the weight format also what a ModelOpt release's hf_quant_config.json says
        data = json.loads(cfg.model_dump_json(exclude_defaults=True))
        weights = checkpoint_weight_format(with_hf_quant_config(raw, stem))
        if weights != cfg.checkpoint_weight_format:
            data["checkpoint_weight_format"] = weights
        out[stem] = data
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    stale = 0
    for stem, data in entries().items():
        target = MODEL_CONFIGS_DIR / f"{stem}.json"
        if data is None:
            print(f"{stem}: refused by the import (no entry)")
            continue
        text = json.dumps(data, indent=4) + "\n"
        if target.exists() and target.read_text() == text:
            continue
        stale += 1
        if args.check:
            print(f"{stem}: {'differs' if target.exists() else 'missing'}")
        else:
            target.write_text(text)
            print(f"{stem}: written")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
