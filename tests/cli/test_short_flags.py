"""Short flags users type (`-t 4`, `-n 256`) keep working as commands gain flags: fire derives a short
flag from a parameter's first letter only while no other parameter shares it, so a new parameter can
silently take one away (it did: `--tokenizer` beside `--tp_size` made `serve -t` ambiguous). The
lists are those the commands' --help showed before this round (round 27)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

SHORT = {
    "serve": {"-c": "concurrency", "-r": "request_rate", "-f": "framework", "-k": "kv_cache_dtype",
              "-n": "num_requests", "-q": "quiet", "-t": "tp_size"},
    "plan infer": {"-n": "num_tokens_to_generate", "-r": "request_rate", "-k": "kv_cache_dtype_bytes", "-t": "top",
                   "-c": "concurrency", "-e": "emit_launch", "-a": "api_latency_s"},
}


@pytest.mark.parametrize("command", sorted(SHORT))
def test_short_flags_keep_their_parameters(command):
    r = subprocess.run([sys.executable, "-m", "llm_analysis", *command.split(), "--help"], capture_output=True,
                       text=True, timeout=120)
    shown = dict(re.findall(r"^\s+(-[a-zA-Z]), --([a-z_]+)=", r.stdout, flags=re.M))
    for short, name in SHORT[command].items():
        assert shown.get(short) == name, (command, short, name, shown)


@pytest.mark.parametrize("command", ["infer", "train", "serve", "plan infer", "plan train"])
def test_every_short_flag_the_help_shows_is_one_argument_s_alone(command):
    """fire's parser refuses a short flag whose letter two arguments start with, positional ones included
    (`plan train ... -t 1`: 'ambiguous: total_num_tokens, top'), while its help had still shown `-t, --top`."""
    prog = ["-m", "llm_analysis.analysis"] if command in ("infer", "train") else ["-m", "llm_analysis"]
    r = subprocess.run([sys.executable, *prog, *command.split(), "--help"], capture_output=True, text=True,
                       timeout=120)
    flags = re.findall(r"(?m)^[ \t]+(?:-\w, )?--(\w+)[=\s]", r.stdout)
    positional = [n.lower() for n in re.findall(r"(?m)^[ \t]+([A-Z][A-Z0-9_]+)[ \t]*$", r.stdout)]
    assert flags
    for letter, name in re.findall(r"(?m)^[ \t]+-(\w), --(\w+)", r.stdout):
        others = [n for n in flags + positional if n != name and n.startswith(letter)]
        assert not others, (command, letter, name, others)
