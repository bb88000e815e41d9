"""Messages a user reads from the command line, as the installed entry points print them (subprocesses run
from an empty directory: the fixtures of conftest.py):

- a name made only of digits (`--gpu_name 4090`, `--dtype_name 16`): fire reads such text as a number, which
  no lookup could match; the name reaches the lookup as typed, which answers as the library answers
  `get_gpu_config_by_name("4090")` (one line naming the kind, the value and the closest names; exit 2);
- `plan --help` lists its commands (fire lists a class's commands only when they are its static methods);
- a vision-language wrapper with `--exact`: both exact paths refuse it for one reason, said once.
"""

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _one_error_line(p) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    return lines[0]


# ------------------------------------------------------------------ names made of digits
# the catalogue's RTX 4090 entry (llm_analysis/gpu_configs/rtx-4090-24gb.json) is the name "4090" is closest to;
# "16" names no data type, and bf16 (16-bit weights and activations) is what the dtype lookup offers for it
@pytest.mark.parametrize("args, value, near", [
    (["infer", "--gpu_name", "4090"], "gpu name '4090'", "rtx-4090-24gb"),
    (["infer", "--gpu_name=4090"], "gpu name '4090'", "rtx-4090-24gb"),
    (["train", "--gpu_name", "4090"], "gpu name '4090'", "rtx-4090-24gb"),
    (["infer", "--dtype_name", "16"], "dtype name '16'", "bf16"),
    (["infer", "--model_name", "4090"], "model name '4090'", "list_model_configs"),
    (["infer", "4090"], "model name '4090'", "list_model_configs"),  # positionally, fire's first parameter
    # plan: positional GPU list, and a comma list fire would make a tuple (4090, 'a100-sxm-80gb') of
    (["plan", "infer", "facebook_opt-1.3b", "4090", "--seq_len", "128", "--num_tokens_to_generate", "8"],
     "gpu name '4090'", "rtx-4090-24gb"),
    (["plan", "infer", "facebook_opt-1.3b", "--gpu_names", "4090,a100-sxm-80gb", "--seq_len", "128",
      "--num_tokens_to_generate", "8"], "gpu name '4090'", "rtx-4090-24gb"),
    (["plan", "infer", "facebook_opt-1.3b", "a100-sxm-80gb", "--dtype_names", "16", "--seq_len", "128",
      "--num_tokens_to_generate", "8"], "dtype name '16'", "bf16"),
])
def test_a_name_of_digits_is_looked_up_as_text(run, args, value, near):
    line = _one_error_line(run(*args))
    assert f"Unknown {value}" in line and near in line, line
    assert "non-empty string" not in line  # (what fire's int used to be refused with)


def test_the_config_command_looks_a_name_of_digits_up_as_text(run):
    line = _one_error_line(run("get_gpu_config_by_name", "4090", module="llm_analysis.config"))
    assert "Unknown gpu name '4090'" in line and "rtx-4090-24gb" in line, line


def test_a_name_of_digits_that_is_a_name_is_found(run, tmp_path):
    # a GPU file named by digits: the text `1234.json` (fire would read `1234` alone as a number; with the
    # suffix it is text already), and a catalogue name given with = and digits elsewhere keeps working
    gpu = json.loads((REPO / "llm_analysis" / "gpu_configs" / "a100-sxm-80gb.json").read_text())
    gpu["name"] = "1234"
    (tmp_path / "1234.json").write_text(json.dumps(gpu))
    p = run("infer", "--gpu_name", "1234.json", "--output_format", "json", "-q")
    assert p.returncode == 0, p.stderr
    p = run("infer", "--gpu_name=a100-sxm-80gb", "--output_format", "json", "-q")
    assert p.returncode == 0, p.stderr


def test_a_dtype_name_of_digits_for_the_kv_cache_is_text_too(run):
    line = _one_error_line(run("infer", "--kv_cache_dtype", "8"))
    assert "kv_cache_dtype = '8'" in line and "fp8" in line, line


@pytest.mark.parametrize("argv, expected", [
    (["infer", "--gpu_name", "4090"], ["infer", "--gpu_name", "'4090'"]),
    (["infer", "--gpu_name=4090"], ["infer", "--gpu_name='4090'"]),
    (["infer", "--gpu-name", "1e3"], ["infer", "--gpu-name", "'1e3'"]),  # fire would give 1000.0
    (["infer", "4090", "--seq_len", "128"], ["infer", "'4090'", "--seq_len", "128"]),  # model_name, positionally
    # 128 is the flag's value; 4090 then fills the first parameter, model_name
    (["infer", "--seq_len", "128", "4090"], ["infer", "--seq_len", "128", "'4090'"]),
    (["infer", "--exact", "4090"], ["infer", "--exact", "4090"]),  # the switch's value, for fire
    (["infer", "--gpu_name", "h100-sxm-80gb"], ["infer", "--gpu_name", "h100-sxm-80gb"]),  # text already
    (["plan", "infer", "m", "--gpu_names", "[4090, h100]"], ["plan", "infer", "m", "--gpu_names", "[4090, h100]"]),
    (["plan", "infer", "m", "16,fp8"], ["plan", "infer", "m", "'16,fp8'"]),  # gpu_names, positionally
    (["infer", "--", "--gpu_name", "4090"], ["infer", "--", "--gpu_name", "4090"]),  # fire's own flags
])
def test_which_tokens_are_kept_as_text(argv, expected):
    from llm_analysis.cli.commands import LLMAnalysisCLI
    from llm_analysis.cli.fire_runner import _names_kept_as_text
    assert _names_kept_as_text(LLMAnalysisCLI, argv) == expected


# ------------------------------------------------------------------ plan --help
@pytest.mark.parametrize("args", [["plan", "--help"], ["plan", "-h"], ["plan"]])
def test_plan_help_lists_its_commands_one_line_each(run, args):
    p = run(*args)
    assert p.returncode == 0, p.stderr
    commands = p.stdout.split("COMMANDS", 1)[1] if "COMMANDS" in p.stdout else ""
    # fire's listing: the command's name indented, its one-line summary under it
    listed = dict(re.findall(r"(?m)^ {5}(\w+)\n {7}(.+)$", commands))
    assert set(listed) == {"infer", "train"}, p.stdout
    assert listed["infer"].startswith("`plan infer`:") and listed["train"].startswith("`plan train`:")
    assert listed["train"].endswith("under the memory limit.")  # the whole summary, not cut


def test_top_level_help_still_lists_every_command(run):
    p = run("--help")
    assert p.returncode == 0, p.stderr
    listed = re.findall(r"(?m)^ {5}(\w+)$", p.stdout.split("COMMANDS", 1)[1])
    assert listed == ["infer", "plan", "serve", "train"]


# ------------------------------------------------------------------ a vision-language wrapper with --exact
# llava-hf/llava-1.5-7b-hf's config.json layout (a LlamaForCausalLM text_config, a CLIP vision_config), shrunk
LLAVA = {"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava", "image_token_index": 32000,
         "projector_hidden_act": "gelu", "vision_feature_layer": -2, "vision_feature_select_strategy": "default",
         "tie_word_embeddings": False,
         "text_config": {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
                         "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                         "num_key_value_heads": 4, "vocab_size": 32064, "max_position_embeddings": 256},
         "vision_config": {"model_type": "clip_vision_model", "hidden_size": 32, "intermediate_size": 64,
                           "num_hidden_layers": 2, "num_attention_heads": 2, "image_size": 28, "patch_size": 14,
                           "projection_dim": 32}}


def test_llava_exact_refusal_says_each_sentence_once(run, tmp_path, exact_cache):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    model_dir = tmp_path / "llava"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps(LLAVA))
    line = _one_error_line(run("infer", "--model_name", str(model_dir), "--exact"))
    # the refusal's two sentences (the derivation's and the family table's reasons are the same): once each
    assert line.count("holds the vision tower and its projector") == 1, line
    assert line.count("To count the language model alone") == 1, line


def test_llava_exact_refusal_says_each_sentence_once_in_the_library(tmp_path, exact_cache):
    # the same refusal raised in this process (the test above runs the installed copy in a subprocess, which a
    # change to this checkout's source does not reach when an older copy is installed)
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from llm_analysis.config import get_gpu_config_by_name
    from llm_analysis.errors import LLMAnalysisError
    from llm_analysis.exact.entry import analysis_from_hf
    model_dir = tmp_path / "llava"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps(LLAVA))
    with pytest.raises(LLMAnalysisError) as refused:
        analysis_from_hf(str(model_dir), get_gpu_config_by_name("h100-sxm-80gb"))
    message = str(refused.value)
    assert message.count("holds the vision tower and its projector") == 1, message
    assert message.count("To count the language model alone") == 1, message
