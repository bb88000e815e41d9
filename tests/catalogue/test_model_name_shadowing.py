"""A name that is both a catalogue entry and a local model directory: the catalogue entry is used (the documented
order, docs/hub-import.md), and a warning says so and how to read the folder, since transformers' from_pretrained
would read the folder (a user's own ./gpt2 of 124,672 parameters had silently been the catalogue's 124,439,808)."""

from __future__ import annotations

import json
import logging

from llm_analysis.config import get_model_config_by_name

SMALL_GPT2 = {"model_type": "gpt2", "n_embd": 32, "n_head": 2, "n_layer": 2, "n_positions": 64, "vocab_size": 128}


def test_a_local_folder_named_like_an_entry_is_named_in_a_warning(tmp_path, monkeypatch, caplog):
    (tmp_path / "gpt2").mkdir()
    (tmp_path / "gpt2" / "config.json").write_text(json.dumps(SMALL_GPT2))
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.WARNING, logger="llm_analysis"):
        entry = get_model_config_by_name("gpt2")
    assert entry.hidden_dim == 768  # the catalogue's GPT-2 (124M: hidden 768)
    assert any("local model directory" in r.getMessage() and "./gpt2" in r.getMessage() for r in caplog.records)
    assert get_model_config_by_name("./gpt2").hidden_dim == 32  # the folder, as the warning says


def test_no_warning_without_such_a_folder(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.WARNING, logger="llm_analysis"):
        get_model_config_by_name("gpt2")
    assert not any("local model directory" in r.getMessage() for r in caplog.records)
