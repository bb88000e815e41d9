"""Request lengths from a conversation dataset: a ShareGPT-style JSON list of
{"conversations": [{"from": "human", "value": text}, {"from": "gpt", "value": text}, ...]}, counted in
tokens by a tokenizer (the served model's, given by name or directory), the way `vllm bench serve
--dataset-name sharegpt` samples such a file (vLLM benchmarks/benchmark_dataset.py, ShareGPTDataset and
is_valid_sequence): each conversation's first turn is the prompt and its second the output, both counted
with the tokenizer's special tokens (`tokenizer(text).input_ids`); a conversation with fewer than two
turns is skipped, and a pair is kept when both sides have at least 4 tokens, the prompt at most 1024 and
the two together at most 2048. The text is never sent anywhere: only its token counts are kept."""

from __future__ import annotations

from typing import Any, List, Tuple

from llm_analysis.errors import ConfigError

# vLLM's is_valid_sequence defaults (min_len, max_prompt_len, max_total_len), which its ShareGPT sampling applies
MIN_TOKENS, MAX_PROMPT_TOKENS, MAX_TOTAL_TOKENS = 4, 1024, 2048


def is_conversation_list(items: Any) -> bool:
    """Whether a parsed JSON file holds conversations (ShareGPT-style) rather than token-length pairs."""
    return isinstance(items, list) and bool(items) and isinstance(items[0], dict) and "conversations" in items[0]


def load_tokenizer(name: str, source: str):
    """The tokenizer `name` (a local directory, or a Hub id already in the local cache, else fetched) via
    transformers; ConfigError naming it when neither works."""
    from transformers import AutoTokenizer  # imported only here: start-up time
    try:
        return AutoTokenizer.from_pretrained(name, local_files_only=True)
    except Exception:  # noqa: BLE001 (not cached, or not a tokenizer directory: try the Hub once)
        pass
    try:
        return AutoTokenizer.from_pretrained(name)
    except Exception as err:  # noqa: BLE001 (transformers raises OSError, ValueError, HTTP errors ...)
        first_line = (str(err).splitlines() or [""])[0][:160]
        raise ConfigError(f"tokenizer = {name!r} for the conversations in {source!r} cannot be loaded "
                          f"({type(err).__name__}: {first_line}); give a local tokenizer directory or a Hub id in "
                          "the local cache (the served model's), or a file of token-length pairs") from None


def conversation_pairs(items: List[Any], tokenizer: Any, source: str) -> List[Tuple[int, int]]:
    """(prompt tokens, output tokens) of each conversation kept (module docstring)."""
    if tokenizer is None:
        raise ConfigError(f"lengths = {source!r} holds conversations (ShareGPT-style text), whose lengths in tokens "
                          "need a tokenizer: give lengths={'file': ..., 'tokenizer': 'the model's Hub id or a local "
                          "tokenizer directory'} (command line: --lengths_tokenizer), or a file of token-length pairs")
    prompts, outputs = [], []
    for k, item in enumerate(items):
        turns = item.get("conversations") if isinstance(item, dict) else None
        if not isinstance(turns, list):
            raise ConfigError(f"lengths = {source!r}: item {k} has no 'conversations' list; a ShareGPT-style file "
                              "is a list of {'conversations': [{'from': ..., 'value': text}, ...]}")
        if len(turns) < 2:
            continue  # no output turn: vLLM's sampling skips it too
        texts = [t.get("value") if isinstance(t, dict) else None for t in turns[:2]]
        if not all(isinstance(t, str) for t in texts):
            raise ConfigError(f"lengths = {source!r}: conversation {k} has a first or second turn without a text "
                              "'value'")
        prompts.append(texts[0])
        outputs.append(texts[1])
    tok = load_tokenizer(tokenizer, source) if isinstance(tokenizer, str) else tokenizer
    if not prompts:
        raise ConfigError(f"lengths = {source!r} holds no conversation with two turns (a prompt and an output)")
    prompt_ids, output_ids = tok(prompts).input_ids, tok(outputs).input_ids
    pairs = [(len(p), len(o)) for p, o in zip(prompt_ids, output_ids)
             if len(p) >= MIN_TOKENS and len(o) >= MIN_TOKENS and len(p) <= MAX_PROMPT_TOKENS
             and len(p) + len(o) <= MAX_TOTAL_TOKENS]
    if not pairs:
        raise ConfigError(f"lengths = {source!r}: none of its {len(prompts)} conversations is kept (each side at least "
                          f"{MIN_TOKENS} tokens, the prompt at most {MAX_PROMPT_TOKENS}, both at most "
                          f"{MAX_TOTAL_TOKENS}, as vLLM's ShareGPT sampling keeps them)")
    return pairs


__all__ = ["MAX_PROMPT_TOKENS", "MAX_TOTAL_TOKENS", "MIN_TOKENS", "conversation_pairs", "is_conversation_list",
           "load_tokenizer"]
