"""Which weights a ModelOpt checkpoint stores low-bit, read from the list of modules its config.json leaves
unquantised (quantization_config "ignore"; hub/quantization.py `_modelopt_quantized_weights`).

The configs are NVIDIA's NVFP4 releases as aiconfigurator copies them (tests/data/hf_configs_aiconfigurator/,
Apache-2.0, SOURCES.md). Reading their lists by hand:
- nvidia/MiniMax-M2.5-NVFP4 and -M2.7: lm_head, and for each of the 62 layers self_attn* and block_sparse_moe.gate:
  only the routed experts are NVFP4;
- nvidia/Kimi-K2.6-NVFP4 and K2.7-Code: layer 0 whole (the dense layer, first_k_dense_replace 1), and for layers
  1-60 self_attn* and mlp.shared_experts*: only the routed experts;
- nvidia/GLM-5.1-NVFP4 and 5.2: layers 0-2 whole (the three dense layers), layers 3-77 self_attn* and
  mlp.shared_experts* (and model.layers.78*, the MTP layer, beyond the 78 counted): only the routed experts;
- nvidia/Gemma-4-26B-A4B-NVFP4: for each of the 30 layers self_attn*, router* and mlp* (the dense MLP beside
  the experts, which Gemma 4 keeps at layers.N.experts): only the routed experts;
- nvidia/Qwen3.5-122B-A10B-NVFP4 and 397B-A17B (hybrid): each layer's linear_attn* (Gated DeltaNet) or self_attn*,
  its mlp.shared_expert* and shared_expert_gate; "mtp.layers.0*" and "mtp*" name the multi-token-prediction
  module (not counted), not decoder layer 0: only the routed experts;
- nvidia/Kimi-K2.5-NVFP4: only each layer's self_attn*: the dense layer's MLP and the shared experts are NVFP4
  too, which neither rule describes (warned of, counted "all");
- nvidia/Gemma-4-31B-IT-NVFP4 (dense): each layer's self_attn*: attention at 16 bits beside NVFP4 MLPs, neither
  rule (warned of, counted "all");
- Qwen/Qwen3-32B-FP8-Static-PerTensor: lm_head only, held at 16 bits anyway: "all", no warning.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name
from llm_analysis.hub.entry import model_config_from_hf_dict

RAW = Path(__file__).resolve().parents[1] / "data" / "hf_configs_aiconfigurator"


@pytest.mark.parametrize("stem,expected", [
    ("nvidia_MiniMax-M2.5-NVFP4", "routed_experts"), ("nvidia_MiniMax-M2.7-NVFP4", "routed_experts"),
    ("nvidia_Kimi-K2.6-NVFP4", "routed_experts"), ("nvidia_Kimi-K2.7-Code-NVFP4", "routed_experts"),
    ("nvidia_GLM-5.1-NVFP4", "routed_experts"), ("nvidia_GLM-5.2-NVFP4", "routed_experts"),
    ("nvidia_Gemma-4-26B-A4B-NVFP4", "routed_experts"),
    ("nvidia_Qwen3.5-122B-A10B-NVFP4", "routed_experts"), ("nvidia_Qwen3.5-397B-A17B-NVFP4", "routed_experts"),
])
def test_releases_keeping_all_but_the_routed_experts_at_16_bits(stem, expected, caplog):
    with caplog.at_level(logging.WARNING, logger="llm_analysis.hub.entry"):
        cfg = get_model_config_by_name(str(RAW / f"{stem}.json"))
    assert (cfg.checkpoint_weight_format, cfg.checkpoint_quantized_weights) == ("nvfp4", expected)
    assert "ModelOpt list" not in caplog.text


@pytest.mark.parametrize("stem", ["nvidia_Kimi-K2.5-NVFP4", "nvidia_Gemma-4-31B-IT-NVFP4"])
def test_lists_neither_rule_describes_are_warned_of_and_counted_all(stem, caplog):
    with caplog.at_level(logging.WARNING, logger="llm_analysis.hub.entry"):
        cfg = get_model_config_by_name(str(RAW / f"{stem}.json"))
    assert cfg.checkpoint_quantized_weights == "all"
    assert "ModelOpt list of modules left unquantised" in caplog.text and "self_attn*" in caplog.text


def test_a_list_naming_only_the_head_is_all_without_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="llm_analysis.hub.entry"):
        cfg = get_model_config_by_name(str(RAW / "Qwen_Qwen3-32B-FP8-Static-PerTensor.json"))
    assert (cfg.checkpoint_weight_format, cfg.checkpoint_quantized_weights) == ("fp8", "all")
    assert "ModelOpt list" not in caplog.text


def _minimax(edit):
    raw = json.loads((RAW / "nvidia_MiniMax-M2.5-NVFP4.json").read_text())
    edit(raw["quantization_config"])
    return model_config_from_hf_dict(raw, name="x").checkpoint_quantized_weights


def test_one_layer_left_out_of_the_list_breaks_the_rule(caplog):
    # layer 7's attention NVFP4 (its entry dropped): neither rule
    def drop(q):
        q["ignore"] = [p for p in q["ignore"] if p != "model.layers.7.self_attn*"]
    with caplog.at_level(logging.WARNING, logger="llm_analysis.hub.entry"):
        assert _minimax(drop) == "all"
    assert "ModelOpt list" in caplog.text


def test_routed_experts_in_the_list_break_the_rule(caplog):
    # one layer's experts left at 16 bits too: not "only the routed experts are low-bit"
    with caplog.at_level(logging.WARNING, logger="llm_analysis.hub.entry"):
        assert _minimax(lambda q: q["ignore"].append("model.layers.3.block_sparse_moe.experts*")) == "all"
    assert "ModelOpt list" in caplog.text


def test_a_glob_over_every_layer_reads_as_the_per_layer_list():
    # exclude_modules as hf_quant_config.json writes it, with "*" for the layer index
    def globbed(q):
        q.pop("ignore")
        q["exclude_modules"] = ["lm_head", "model.layers.*.self_attn*", "model.layers.*.block_sparse_moe.gate"]
    assert _minimax(globbed) == "routed_experts"


# MiniMax-M2.5 (config.json above; transformers' MiniMaxM2 modelling): hidden 3072, 62 layers, 48 query heads and
# 8 KV heads of 128, 256 experts of intermediate 1536 (w1, w3: 3072 x 1536, w2: 1536 x 3072), no shared expert,
# vocab 200064, untied head, no biases; per layer q_norm over 48 x 128 and k_norm over 8 x 128 (qk_norm_type
# per_layer), two RMSNorms, the router Linear(3072, 256) (its e_score_correction_bias is a buffer, not a
# parameter); a final RMSNorm.
H, L, Q, KV, D, E, F, V = 3072, 62, 48, 8, 128, 256, 1536, 200064
EXPERTS = L * E * 3 * H * F
PER_LAYER_OTHER = (H * Q * D + 2 * H * KV * D + Q * D * H) + (Q * D + KV * D) + 2 * H + H * E
EMBEDDINGS = 2 * V * H + H  # embeddings, head, final norm
NVFP4_BYTES = (4 + 8 / 16) / 8  # E2M1 values, one E4M3 scale per 16 (NVIDIA NVFP4)


def test_weight_memory_holds_the_experts_at_nvfp4_and_the_rest_at_bf16():
    cfg = get_model_config_by_name(str(RAW / "nvidia_MiniMax-M2.5-NVFP4.json"))
    a = LLMAnalysis(cfg, get_gpu_config_by_name("b200-180gb"), get_dtype_config_by_name("nvfp4"),
                    ParallelismConfig())
    assert a.get_num_params_total() == EXPERTS + L * PER_LAYER_OTHER + EMBEDDINGS
    expected = EXPERTS * NVFP4_BYTES + (L * PER_LAYER_OTHER + EMBEDDINGS) * 2
    assert a.get_weight_memory_per_gpu() == pytest.approx(expected, rel=1e-12)


def test_shared_experts_missing_from_the_list_break_the_rule(caplog):
    # GLM-5.1 without its mlp.shared_experts* entries: the shared experts NVFP4 beside 16-bit attention, neither rule
    raw = json.loads((RAW / "nvidia_GLM-5.1-NVFP4.json").read_text())
    raw["quantization_config"]["ignore"] = [p for p in raw["quantization_config"]["ignore"] if "shared_experts" not in p]
    with caplog.at_level(logging.WARNING, logger="llm_analysis.hub.entry"):
        assert model_config_from_hf_dict(raw, name="x").checkpoint_quantized_weights == "all"
    assert "ModelOpt list" in caplog.text


def test_dense_layers_missing_from_the_list_break_the_rule(caplog):
    # GLM-5.1 with only the attention of its three dense layers listed (not the whole layers): their MLPs NVFP4,
    # neither rule
    raw = json.loads((RAW / "nvidia_GLM-5.1-NVFP4.json").read_text())
    whole = ("model.layers.0*", "model.layers.1.*", "model.layers.2.*")
    raw["quantization_config"]["ignore"] = [p for p in raw["quantization_config"]["ignore"] if p not in whole] + [
        f"model.layers.{i}.self_attn*" for i in range(3)]
    with caplog.at_level(logging.WARNING, logger="llm_analysis.hub.entry"):
        assert model_config_from_hf_dict(raw, name="x").checkpoint_quantized_weights == "all"
    assert "ModelOpt list" in caplog.text


def test_a_local_directory_reads_hf_quant_config_beside_config_json(tmp_path, caplog):
    # nvidia/DeepSeek-V3.1-NVFP4 states its quantisation only in hf_quant_config.json (tests/data/.../hf_quant_config/):
    # NVFP4, with each layer's q_a / q_b / kv_a / kv_b projections left out but not o_proj: neither rule (warned of)
    stem = "nvidia_DeepSeek-V3.1-NVFP4"
    raw = json.loads((RAW / f"{stem}.json").read_text())
    assert "quantization_config" not in raw
    (tmp_path / "config.json").write_text(json.dumps(raw))
    (tmp_path / "hf_quant_config.json").write_text((RAW / "hf_quant_config" / f"{stem}.json").read_text())
    with caplog.at_level(logging.WARNING, logger="llm_analysis.hub.entry"):
        cfg = get_model_config_by_name(str(tmp_path))
    assert (cfg.checkpoint_weight_format, cfg.checkpoint_quantized_weights) == ("nvfp4", "all")
    assert "ModelOpt list" in caplog.text and "q_a_proj" in caplog.text


def test_a_sidecar_list_of_routed_experts_only_is_read(tmp_path):
    # MiniMax-M2.5's config.json without its quantization_config, the same facts in an hf_quant_config.json
    raw = json.loads((RAW / "nvidia_MiniMax-M2.5-NVFP4.json").read_text())
    raw.pop("quantization_config")
    (tmp_path / "config.json").write_text(json.dumps(raw))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps({"producer": {"name": "modelopt"}, "quantization": {
        "quant_algo": "NVFP4", "group_size": 16,
        "exclude_modules": ["lm_head", "model.layers.*.self_attn*", "model.layers.*.block_sparse_moe.gate"]}}))
    cfg = get_model_config_by_name(str(tmp_path))
    assert (cfg.checkpoint_weight_format, cfg.checkpoint_quantized_weights) == ("nvfp4", "routed_experts")
    (tmp_path / "hf_quant_config.json").unlink()
    cfg = get_model_config_by_name(str(tmp_path))
    assert (cfg.checkpoint_weight_format, cfg.checkpoint_quantized_weights) == (None, "all")


# -- the Hub import fetches hf_quant_config.json where config.json states no quantisation -----------------------

def _hub_client(ops, endpoint, home, **extra):
    """Run tests/support/hub_server.py's client (a fresh interpreter: huggingface_hub reads HF_ENDPOINT, HF_HOME and
    HF_HUB_OFFLINE when imported) on `ops`; returns (results, stderr: the warnings the import logged)."""
    import os
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGING_FACE_", "TRANSFORMERS_")) and "PROXY" not in k.upper()}
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(home), HF_HUB_DISABLE_TELEMETRY="1", NO_PROXY="127.0.0.1,localhost",
               PYTHONPATH=str(root), PYTHONWARNINGS="ignore", **extra)
    p = subprocess.run([sys.executable, str(root / "tests" / "support" / "hub_server.py"), "client"],
                       input=json.dumps(ops), capture_output=True, text=True, env=env, cwd=root, timeout=300)
    assert "@@RESULTS@@" in p.stdout, p.stderr[-3000:]
    return json.loads(p.stdout.split("@@RESULTS@@", 1)[1])["results"], p.stderr


def _formats(results):
    return [(r["ok"]["checkpoint_weight_format"], r["ok"]["checkpoint_quantized_weights"]) if "ok" in r
            else r["error"] + ": " + r["message"] for r in results]


def test_the_hub_import_reads_hf_quant_config_beside_config_json(loopback_hub, tmp_path):
    # The same three facts as the local-directory tests above, served by a loopback Hub: DeepSeek-V3.1-NVFP4 (only
    # hf_quant_config.json states NVFP4; its list is neither rule: warned of, "all"), MiniMax-M2.5's config.json with
    # its list moved to an hf_quant_config.json (routed experts only), and that config.json alone (no format).
    deepseek = "nvidia_DeepSeek-V3.1-NVFP4"
    minimax = json.loads((RAW / "nvidia_MiniMax-M2.5-NVFP4.json").read_text())
    minimax.pop("quantization_config")
    minimax_sidecar = {"producer": {"name": "modelopt"}, "quantization": {
        "quant_algo": "NVFP4", "group_size": 16,
        "exclude_modules": ["lm_head", "model.layers.*.self_attn*", "model.layers.*.block_sparse_moe.gate"]}}
    hub = loopback_hub({
        "nvidia/DeepSeek-V3.1-NVFP4": {"main": {
            "config.json": (RAW / f"{deepseek}.json").read_bytes(),
            "hf_quant_config.json": (RAW / "hf_quant_config" / f"{deepseek}.json").read_bytes()}},
        "acme/minimax-sidecar": {"main": {"config.json": json.dumps(minimax).encode(),
                                          "hf_quant_config.json": json.dumps(minimax_sidecar).encode()}},
        "acme/minimax-plain": {"main": {"config.json": json.dumps(minimax).encode()}}})
    ops = [{"op": "hf", "name": n} for n in ("nvidia/DeepSeek-V3.1-NVFP4", "acme/minimax-sidecar",
                                              "acme/minimax-plain")]
    expected = [("nvfp4", "all"), ("nvfp4", "routed_experts"), (None, "all")]
    home = tmp_path / "hf-home"
    online, online_log = _hub_client(ops, hub.endpoint, home)
    assert _formats(online) == expected
    assert "q_a_proj" in online_log and "could not be read" not in online_log
    asked = [p for _, p, _ in hub.requests]
    assert "/acme/minimax-plain/resolve/main/hf_quant_config.json" in asked
    # offline, the cache answers for each: the files it holds, and the Hub's "no such file" for the plain repository
    before = len(hub.requests)
    offline, offline_log = _hub_client(ops, hub.endpoint, home, HF_HUB_OFFLINE="1")
    assert _formats(offline) == expected and hub.requests[before:] == []
    assert "could not be read" not in offline_log


def test_an_offline_cache_without_an_answer_for_the_sidecar_is_warned_of(loopback_hub, tmp_path):
    # a cache holding config.json only (fetched by something that never asked for hf_quant_config.json): offline,
    # whether the release states a quantisation there cannot be known, and the import says so
    raw = (RAW / "nvidia_DeepSeek-V3.1-NVFP4.json").read_bytes()
    hub = loopback_hub({"nvidia/DeepSeek-V3.1-NVFP4": {"main": {"config.json": raw}}})
    home = tmp_path / "hf-home"
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_") and "PROXY" not in k.upper()}
    env.update(HF_ENDPOINT=hub.endpoint, HF_HOME=str(home), NO_PROXY="127.0.0.1,localhost")
    subprocess.run([sys.executable, "-c", "import huggingface_hub; huggingface_hub.hf_hub_download("
                    "'nvidia/DeepSeek-V3.1-NVFP4', 'config.json')"], env=env, check=True, timeout=120)
    results, log = _hub_client([{"op": "hf", "name": "nvidia/DeepSeek-V3.1-NVFP4"}], hub.endpoint, home,
                               HF_HUB_OFFLINE="1")
    assert _formats(results) == [(None, "all")]
    assert "hf_quant_config.json could not be read" in log and "HF_HUB_OFFLINE" in log
