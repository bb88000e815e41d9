"""serve() on a ShareGPT-style conversation file: each conversation's first two turns counted in tokens
by a real tokenizer (transformers, built here from the `tokenizers` library: one token per
whitespace-separated word and a beginning-of-sequence token, so every count below is words + 1), kept as
`vllm bench serve --dataset-name sharegpt` keeps them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from llm_analysis.errors import ConfigError
from llm_analysis.planner import plan_inference

MODEL, GPU = "meta-llama/Llama-3.1-8B", "h100-sxm-80gb"


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast
    tk = Tokenizer(models.WordLevel(vocab={"[UNK]": 0, "<s>": 1}, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    path = tmp_path_factory.mktemp("tokenizer")
    PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]", bos_token="<s>").save_pretrained(path)
    return str(path)


def _turns(*texts):
    return {"conversations": [{"from": "human" if i % 2 == 0 else "gpt", "value": t} for i, t in enumerate(texts)]}


@pytest.fixture(scope="module")
def sharegpt_file(tmp_path_factory):
    conversations = [
        _turns("hello how are you", "i am fine thank you for asking", "and a third turn"),  # 5, 8 tokens: kept
        _turns("hello", "a reply of five words"),  # a 2-token prompt: under 4, dropped
        _turns("a single turn with no reply"),  # no output turn: skipped
        _turns(" ".join(["word"] * 1100), "a short reply here"),  # prompt 1101 tokens > 1024: dropped
        _turns(" ".join(["word"] * 1000), " ".join(["word"] * 1100)),  # 1001 + 1101 > 2048: dropped
        _turns("write a haiku about gpus", "can help today"),  # 6, 4 tokens: kept
    ]
    path = tmp_path_factory.mktemp("data") / "sharegpt.json"
    path.write_text(json.dumps(conversations))
    return str(path)


def test_conversations_are_counted_and_kept_as_vllm_bench_keeps_them(analysis_builder, sharegpt_file,
                                                                     tokenizer_dir):
    a = analysis_builder(MODEL, gpu=GPU, perf_model="calibrated")
    s = a.serve(concurrency=4, lengths={"file": sharegpt_file, "tokenizer": tokenizer_dir}, num_requests=0)
    # kept: (5, 8) and (6, 4)
    assert s["input_len_mean"] == pytest.approx((5 + 6) / 2)
    assert s["output_len_mean"] == pytest.approx((8 + 4) / 2)
    # the same answer as the pairs written by hand
    by_hand = a.serve(concurrency=4, lengths=[(5, 8), (6, 4)], num_requests=0)
    assert s["ttft_s"] == by_hand["ttft_s"] and s["tpot_s"] == by_hand["tpot_s"]


def test_cli_serve_with_tokenizer(sharegpt_file, tokenizer_dir):
    r = subprocess.run([sys.executable, "-m", "llm_analysis", "serve", "--model_name", MODEL, "--gpu_name", GPU,
                        "--concurrency", "4", "--lengths_file", sharegpt_file, "--lengths_tokenizer", tokenizer_dir,
                        "--num_requests", "0", "--output_format", "json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["input_len_mean"] == pytest.approx(5.5) and answer["output_len_mean"] == pytest.approx(6.0)


def test_plan_on_conversations_reproduces_the_file_and_tokenizer(sharegpt_file, tokenizer_dir):
    lengths = {"file": sharegpt_file, "tokenizer": tokenizer_dir}
    r = plan_inference(MODEL, [GPU], {"max_tpot_s": 0.05, "concurrency": 16}, lengths=lengths)
    assert r.best["reproduce"]["serve_kwargs"]["lengths"] == lengths
    assert "2 (input, output) length pairs from" in r.assumptions["workload"]


def test_bad_conversation_inputs_are_named(analysis_builder, sharegpt_file, tokenizer_dir, tmp_path):
    a = analysis_builder(MODEL, gpu=GPU)
    with pytest.raises(ConfigError) as e:
        a.serve(concurrency=4, lengths=sharegpt_file, num_requests=0)
    assert "holds conversations" in str(e.value) and "tokenizer" in str(e.value)
    with pytest.raises(ConfigError) as e:
        a.serve(concurrency=4, lengths={"file": sharegpt_file, "tokenizer": str(tmp_path / "none")}, num_requests=0)
    assert str(e.value).startswith(f"tokenizer = '{tmp_path / 'none'}'")
    pairs = tmp_path / "pairs.json"
    pairs.write_text("[[100, 20]]")
    with pytest.raises(ConfigError) as e:
        a.serve(concurrency=4, lengths={"file": str(pairs), "tokenizer": tokenizer_dir}, num_requests=0)
    assert "holds token lengths, not conversations" in str(e.value)
    none_kept = tmp_path / "short.json"
    none_kept.write_text(json.dumps([_turns("hi", "yo")]))
    with pytest.raises(ConfigError) as e:
        a.serve(concurrency=4, lengths={"file": str(none_kept), "tokenizer": tokenizer_dir}, num_requests=0)
    assert "none of its 1 conversations is kept" in str(e.value)
    with pytest.raises(ConfigError) as e:
        a.serve(concurrency=4, lengths={"file": sharegpt_file, "tokeniser": tokenizer_dir}, num_requests=0)
    assert "must be {'file': path, 'tokenizer': name}" in str(e.value)


def test_a_hub_tokenizer_is_fetched_through_huggingface_hub(loopback_hub, sharegpt_file, tokenizer_dir, tmp_path):
    """The tokenizer named by Hub id, fetched by transformers / huggingface_hub from the loopback Hub."""
    import os
    from pathlib import Path
    files = {p.name: p.read_bytes() for p in Path(tokenizer_dir).iterdir()}
    hub = loopback_hub({"acme/tiny-words": {"main": files}})
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGING_FACE_", "TRANSFORMERS_")) and "PROXY" not in k.upper()}
    env.update(HF_ENDPOINT=hub.endpoint, HF_HOME=str(tmp_path / "hf-home"), HF_HUB_DISABLE_TELEMETRY="1",
               NO_PROXY="127.0.0.1,localhost", PYTHONWARNINGS="ignore")
    r = subprocess.run([sys.executable, "-m", "llm_analysis", "serve", "--model_name", MODEL, "--gpu_name", GPU,
                        "--concurrency", "4", "--lengths_file", sharegpt_file, "--lengths_tokenizer", "acme/tiny-words",
                        "--num_requests", "0", "--output_format", "json"], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["input_len_mean"] == pytest.approx(5.5)
    assert any(path.endswith("/tokenizer.json") for _, path, _ in hub.requests)
