"""Import a model's shapes from a Hugging Face `config.json`.

`get_model_config_from_hf` downloads `config.json` with
`huggingface_hub.hf_hub_download` (which honours `HF_TOKEN`, `HF_ENDPOINT`,
`HF_HUB_OFFLINE`, `HF_HOME`/`HF_HUB_CACHE` and the standard cache) and maps it to a
`ModelConfig`. When `transformers` knows the `model_type`, the dict is first turned
into the library's own config class (`CONFIG_MAPPING[model_type].from_dict`), so the
defaults the real model code would use are filled in (e.g. Gemma 3's `text_config`
lists only what differs from `Gemma3TextConfig`); otherwise the raw JSON is mapped.
No code from a repository is ever run unless `trust_remote_code=True`.

The mapping is per family (a table keyed by `model_type`), derived from the
modelling code of `transformers`: which projections carry biases, how many norms a
block has, whether the MLP is gated, which layers are MoE or slide. Anything the
`ModelConfig` fields cannot describe exactly raises `UnmappableConfig` rather than
being approximated silently.

Every failure raises a `HubImportError` subclass whose message names the model id
and revision; tracebacks from inside `huggingface_hub`/`transformers` are not chained
(`raise ... from None`). Neither library is imported at module import time.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from .schema import ModelConfig, build_config
from .errors import ConfigError, HubImportError

logger = logging.getLogger(__name__)

__all__ = [
    "RepoNotFound", "GatedRepo", "RevisionNotFound", "HubOffline", "HubUnreachable",
    "UnmappableConfig", "get_model_config_from_hf", "model_config_from_hf_dict",
    "model_config_from_local_dir", "looks_like_hf_config", "SUPPORTED_MODEL_TYPES",
]


# ---------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------

class RepoNotFound(HubImportError):
    """No such model repository on the Hub (or it is private and we have no access)."""


class GatedRepo(HubImportError):
    """The repository is gated: the user must accept its terms and authenticate."""


class RevisionNotFound(HubImportError):
    """The repository exists but the requested revision (branch, tag, commit) does not."""


class HubOffline(HubImportError):
    """HF_HUB_OFFLINE is set and the config is not in the local cache."""


class HubUnreachable(HubImportError):
    """The Hub endpoint could not be reached and the config is not in the local cache."""


class UnmappableConfig(HubImportError):
    """The config lacks attributes we need, or describes something ModelConfig cannot."""


def _what(name: str, revision: Optional[str]) -> str:
    return f"model {name!r} (revision {revision or 'main'!r})"


# ---------------------------------------------------------------------------
# download
# ---------------------------------------------------------------------------

def _download_config_json(name: str, revision: Optional[str]) -> Tuple[str, str]:
    """Fetch `config.json` of a Hub repo; returns (local path, endpoint)."""
    try:
        import huggingface_hub
        from huggingface_hub import constants, errors
    except ImportError:  # pragma: no cover - a declared dependency
        raise HubImportError(
            f"Cannot fetch {_what(name, revision)} from the Hugging Face Hub: the "
            "`huggingface_hub` package is not installed (pip install huggingface_hub).") from None

    what = _what(name, revision)
    endpoint = constants.ENDPOINT
    try:
        path = huggingface_hub.hf_hub_download(repo_id=name, filename="config.json", revision=revision)
        return path, endpoint
    except errors.GatedRepoError:
        has_token = huggingface_hub.get_token() is not None
        if has_token and getattr(constants, "HF_HUB_DISABLE_IMPLICIT_TOKEN", False):
            hint = ("A token is configured but HF_HUB_DISABLE_IMPLICIT_TOKEN=1 stops it from being "
                    "sent: unset HF_HUB_DISABLE_IMPLICIT_TOKEN.")
        elif has_token:
            hint = ("A token was found (HF_TOKEN or `huggingface-cli login`) but it has no access: "
                    f"request access on {endpoint}/{name} with that account, or use a token of an "
                    "account that has it.")
        else:
            hint = ("Accept its terms on the model page, then authenticate: set the HF_TOKEN "
                    "environment variable to an access token, or run `huggingface-cli login` "
                    "(`hf auth login`).")
        err = GatedRepo(f"Cannot fetch config.json of {what}: the repository is gated. {hint}")
    except errors.RepositoryNotFoundError:
        err = RepoNotFound(
            f"No model repository {name!r} on {endpoint} (revision {revision or 'main'!r}): it does "
            "not exist, or it is private and no token with access was given (set HF_TOKEN or run "
            "`huggingface-cli login`).")
    except errors.RevisionNotFoundError:
        err = RevisionNotFound(
            f"Model repository {name!r} exists on {endpoint} but has no revision "
            f"{revision or 'main'!r} (branch, tag or commit).")
    except errors.RemoteEntryNotFoundError:
        err = HubImportError(
            f"{what} on {endpoint} has no config.json; it is not a transformers model repository.")
    except errors.HFValidationError as exc:
        err = RepoNotFound(f"{name!r} is not a valid Hugging Face model id: {exc}")
    except errors.LocalEntryNotFoundError as exc:
        if isinstance(exc.__cause__, errors.FileMetadataError):
            err = HubUnreachable(
                f"Cannot fetch config.json of {what}: {endpoint} answered, but not like a Hugging "
                "Face Hub (no X-Repo-Commit/ETag headers), and the file is not in the local cache "
                f"({constants.HF_HUB_CACHE}). Check HF_ENDPOINT and any proxy or captive portal.")
        elif constants.is_offline_mode():
            err = HubOffline(
                f"Cannot fetch config.json of {what}: offline mode is on (HF_HUB_OFFLINE=1) and it "
                f"is not in the local cache ({constants.HF_HUB_CACHE}). Unset HF_HUB_OFFLINE to "
                "download it, or give a catalogue name, a local model directory or a config.json path.")
        else:
            err = HubUnreachable(
                f"Cannot fetch config.json of {what}: the Hub at {endpoint} could not be reached "
                f"and it is not in the local cache ({constants.HF_HUB_CACHE}). Check the network, "
                "proxy settings and HF_ENDPOINT; or give a catalogue name, a local model directory "
                "or a config.json path.")
    except errors.OfflineModeIsEnabled:
        err = HubOffline(
            f"Cannot fetch config.json of {what}: offline mode is on (HF_HUB_OFFLINE=1) and it is "
            f"not in the local cache ({constants.HF_HUB_CACHE}).")
    except errors.HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", "?")
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        err = HubImportError(
            f"Cannot fetch config.json of {what}: {endpoint} answered HTTP {status} ({first}).")
    except OSError as exc:  # cache not writable, disk full, connection errors surfaced as OSError
        err = HubImportError(f"Cannot fetch config.json of {what}: {type(exc).__name__}: {exc}")
    except Exception as exc:  # httpx errors (proxy, TLS) and anything else: never a raw traceback
        err = HubUnreachable(
            f"Cannot fetch config.json of {what} from {endpoint}: {type(exc).__name__}: {exc}")
    raise err from None


def _read_json_file(path: str | os.PathLike, what: str) -> Dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as exc:
        raise HubImportError(f"config.json of {what} is not valid JSON: {exc.msg} at line "
                             f"{exc.lineno} column {exc.colno}") from None
    except OSError as exc:
        raise HubImportError(f"Cannot read config.json of {what}: {exc.strerror or exc}") from None
    if not isinstance(data, dict):
        raise HubImportError(f"config.json of {what} must hold a JSON object, not {type(data).__name__}")
    return data


# ---------------------------------------------------------------------------
# public entry points
# ---------------------------------------------------------------------------

def get_model_config_from_hf(name: str, revision: Optional[str] = None,
                             trust_remote_code: bool = False) -> ModelConfig:
    """Download `config.json` of Hub model `name` (at `revision`, default main) and map it.

    Raises `RepoNotFound`, `GatedRepo`, `RevisionNotFound`, `HubOffline`,
    `HubUnreachable`, `UnmappableConfig` (all `HubImportError`)."""
    if not isinstance(name, str) or not name.strip():
        raise RepoNotFound(f"model id must be a non-empty string, got {name!r}")
    if revision is not None and (not isinstance(revision, str) or not revision):
        raise HubImportError(f"revision must be a non-empty string or None, got {revision!r}")
    what = _what(name, revision)
    path, _endpoint = _download_config_json(name, revision)
    data = _read_json_file(path, what)
    return _map(data, name=name, source=f"huggingface.co/{name}@{revision or 'main'}", what=what,
                trust_remote_code=trust_remote_code, revision=revision)


def model_config_from_hf_dict(d: Dict[str, Any], name: str, source: str = "") -> ModelConfig:
    """Map a Hugging Face config dict (the content of `config.json`) to a ModelConfig.

    Never runs repository code (there is no repository to fetch it from)."""
    if not isinstance(d, dict):
        raise HubImportError(f"a Hugging Face config must be a dict, got {type(d).__name__}")
    return _map(d, name=name, source=source, what=f"model {name!r}", trust_remote_code=False,
                revision=None)


def model_config_from_local_dir(path: str | os.PathLike) -> ModelConfig:
    """Map `path/config.json` of a local model directory (e.g. a `save_pretrained` output)."""
    p = Path(path)
    cfg_path = p / "config.json"
    if not cfg_path.is_file():
        raise ConfigError(f"{str(p)!r} is a directory but holds no config.json; give a model "
                          "directory saved by transformers, a config .json file or a catalogue name")
    name = p.resolve().name or str(p)
    data = _read_json_file(cfg_path, f"local model directory {str(p)!r}")
    return _map(data, name=name, source=str(cfg_path), what=f"local model {str(p)!r}",
                trust_remote_code=False, revision=None)


_HF_STYLE_KEYS = frozenset({
    "model_type", "architectures", "transformers_version", "_name_or_path", "torch_dtype", "dtype",
    "hidden_size", "num_hidden_layers", "num_attention_heads", "n_embd", "n_layer", "n_positions",
    "intermediate_size", "max_position_embeddings", "d_model", "text_config", "auto_map",
})


def looks_like_hf_config(d: Any) -> bool:
    """True for a transformers `config.json` dict, False for our own ModelConfig JSON."""
    if not isinstance(d, dict) or not d:
        return False
    ours = set(ModelConfig.model_fields)
    if set(d) <= ours:
        return False  # every key is a ModelConfig field (it may carry model_type too)
    return bool(_HF_STYLE_KEYS & set(d))


# ---------------------------------------------------------------------------
# transformers config construction
# ---------------------------------------------------------------------------

@contextlib.contextmanager
def _quiet_transformers():
    try:
        from transformers.utils import logging as tlog
    except Exception:  # pragma: no cover
        yield
        return
    old = tlog.get_verbosity()
    tlog.set_verbosity_error()
    try:
        yield
    finally:
        tlog.set_verbosity(old)


def _transformers_config(d: Dict[str, Any], *, name: str, revision: Optional[str],
                         trust_remote_code: bool, what: str):
    """The transformers config object for `d`, or None (unknown type / transformers absent)."""
    model_type = d.get("model_type")
    try:
        with _quiet_transformers():
            from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    except Exception as exc:  # transformers missing or broken: map the raw JSON
        logger.info("transformers unavailable (%s); mapping the raw config.json of %s", exc, what)
        return None
    if isinstance(model_type, str) and model_type in CONFIG_MAPPING:
        try:
            with _quiet_transformers():
                return CONFIG_MAPPING[model_type].from_dict(copy.deepcopy(d))
        except Exception as exc:
            logger.warning("transformers could not build its %r config for %s (%s: %s); mapping the "
                           "raw config.json instead", model_type, what, type(exc).__name__,
                           str(exc).strip().splitlines()[-1] if str(exc).strip() else "")
            return None
    auto_map = d.get("auto_map") or {}
    if trust_remote_code:
        if isinstance(auto_map, dict) and "AutoConfig" in auto_map:
            try:
                with _quiet_transformers():
                    from transformers import AutoConfig
                    return AutoConfig.from_pretrained(name, revision=revision, trust_remote_code=True)
            except Exception as exc:
                raise HubImportError(
                    f"Running the remote configuration code of {what} failed: "
                    f"{type(exc).__name__}: {exc}") from None
    elif isinstance(auto_map, dict) and "AutoConfig" in auto_map:
        logger.info("%s has custom configuration code (auto_map); not running it without "
                    "trust_remote_code=True, mapping the raw config.json", what)
    return None


# ---------------------------------------------------------------------------
# attribute access over a transformers config object or a raw dict
# ---------------------------------------------------------------------------

_MISSING = object()


class _Src:
    """Reads attributes from a transformers config (defaults filled in) or a raw dict,
    recording the required ones that are absent."""

    def __init__(self, obj: Any, raw: Dict[str, Any]):
        self.obj = obj
        self.raw = raw
        self.missing: List[str] = []

    def _lookup(self, key: str) -> Any:
        if self.obj is not None:
            try:
                return getattr(self.obj, key)
            except AttributeError:
                pass
            except Exception:  # transformers properties may raise on odd configs
                pass
        v = self.raw.get(key, _MISSING)
        return v

    def has(self, key: str) -> bool:
        v = self._lookup(key)
        return v is not _MISSING and v is not None

    def get(self, *keys: str, default: Any = _MISSING) -> Any:
        for k in keys:
            v = self._lookup(k)
            if v is not _MISSING and v is not None:
                return v
        if default is _MISSING:
            self.missing.append(keys[0] if len(keys) == 1 else " or ".join(keys))
            return None
        return default

    def req_int(self, *keys: str) -> Optional[int]:
        v = self.get(*keys)
        if v is None:
            return None
        return _as_int(v, keys[0])

    def opt_int(self, *keys: str, default: Any = None) -> Optional[int]:
        v = self.get(*keys, default=default)
        return None if v is None else _as_int(v, keys[0])


def _as_int(v: Any, key: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or int(v) != v:
        raise UnmappableConfig(f"attribute {key!r} = {v!r} must be an integer")
    return int(v)


_ACTIVATIONS = {
    "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh",
    "gelu_accurate": "gelu_tanh", "gelu_python_tanh": "gelu_tanh", "gelu_tanh": "gelu_tanh",
    "gelu": "gelu", "gelu_python": "gelu", "gelu_10": "gelu",
    "silu": "silu", "swish": "silu", "relu": "relu", "quick_gelu": "quick_gelu",
    "relu2": "relu2", "tanh": "tanh", "sigmoid": "sigmoid", "mish": "mish",
}


def _activation(v: Any) -> str:
    if not isinstance(v, str):
        return "gelu"
    return _ACTIVATIONS.get(v.lower(), v.lower())


def _positive_or_none(v: Any) -> Optional[int]:
    if v is None or isinstance(v, bool):
        return None
    try:
        iv = int(v)
    except (TypeError, ValueError):
        return None
    return iv if iv > 0 else None


def _attention_layout(layer_types: Any, sliding_window: Any, num_layers: Optional[int],
                      what: str) -> Tuple[Optional[int], Optional[List[str]]]:
    """(sliding_window, layer_types) as ModelConfig wants them: layer_types only when
    layers differ; sliding_window only when some layer slides."""
    window = _positive_or_none(sliding_window)
    if layer_types is None:
        return window, None  # every layer slides when a window is set (Mistral v0.1, Phi-3)
    lt = [str(t) for t in layer_types]
    odd = sorted(set(lt) - {"full_attention", "sliding_attention"})
    if odd:
        raise UnmappableConfig(
            f"{what}: layer_types contains {odd}; ModelConfig describes only full_attention and "
            "sliding_attention layers")
    if num_layers is not None and len(lt) != num_layers:
        raise UnmappableConfig(f"{what}: layer_types has {len(lt)} entries for {num_layers} layers")
    if all(t == "full_attention" for t in lt):
        return None, None
    if window is None:
        raise UnmappableConfig(f"{what}: layer_types lists sliding_attention layers but "
                               "sliding_window is not set")
    if all(t == "sliding_attention" for t in lt):
        return window, None
    return window, lt


def _moe_layout(moe_layers: Iterable[int], num_layers: int, what: str) -> Tuple[int, int]:
    """(moe_first_dense_layers, moe_layer_freq) that reproduce the set of MoE layers."""
    layers = sorted(set(moe_layers))
    if not layers:
        raise UnmappableConfig(f"{what}: the config declares experts but no layer is a MoE layer")
    first = layers[0]
    freq = layers[1] - layers[0] if len(layers) > 1 else max(1, num_layers - first)
    rebuilt = [i for i in range(num_layers) if i >= first and (i - first) % freq == 0]
    if rebuilt != layers:
        raise UnmappableConfig(
            f"{what}: MoE layers {layers} are not 'the first k layers dense, then every n-th layer', "
            "which is what ModelConfig (moe_first_dense_layers, moe_layer_freq) can describe")
    return first, freq


# ---------------------------------------------------------------------------
# family mappers: each returns ModelConfig fields (name/source/model_type added later)
# ---------------------------------------------------------------------------

Fields = Dict[str, Any]


def _max_seq(src: _Src, *keys: str) -> Optional[int]:
    return src.opt_int(*(keys or ("max_position_embeddings",)), default=None)


def _map_gpt2(src: _Src, what: str) -> Fields:
    h = src.req_int("n_embd", "hidden_size")
    n_pos = src.req_int("n_positions", "max_position_embeddings")
    f: Fields = dict(
        num_layers=src.req_int("n_layer", "num_hidden_layers"),
        n_head=src.req_int("n_head", "num_attention_heads"),
        hidden_dim=h, vocab_size=src.req_int("vocab_size"), max_seq_len=n_pos,
        ffn_embed_dim=src.opt_int("n_inner", default=None) or (4 * h if h else None),
        activation=_activation(src.get("activation_function", default="gelu_new")),
        qkv_bias=True, attn_out_bias=True, mlp_bias=True,
        norm_type="layernorm", norm_bias=True, position_embedding_type="learned",
        num_position_embeddings=n_pos,
        tie_word_embeddings=bool(src.get("tie_word_embeddings", default=True)),
    )
    return f


def _map_gpt_bigcode(src: _Src, what: str) -> Fields:
    f = _map_gpt2(src, what)
    f["activation"] = _activation(src.get("activation_function", default="gelu_pytorch_tanh"))
    if bool(src.get("multi_query", default=True)):
        f["num_key_value_heads"] = 1
    return f


def _map_gptj(src: _Src, what: str) -> Fields:
    h = src.req_int("n_embd", "hidden_size")
    return dict(
        num_layers=src.req_int("n_layer", "num_hidden_layers"),
        n_head=src.req_int("n_head", "num_attention_heads"),
        hidden_dim=h, vocab_size=src.req_int("vocab_size"),
        max_seq_len=src.opt_int("n_positions", "max_position_embeddings"),
        ffn_embed_dim=src.opt_int("n_inner", default=None) or (4 * h if h else None),
        activation=_activation(src.get("activation_function", default="gelu_new")),
        qkv_bias=False, attn_out_bias=False, mlp_bias=True,
        norm_type="layernorm", norm_bias=True, position_embedding_type="rotary",
        parallel_attn_mlp=True, num_norms_per_layer=1,
        tie_word_embeddings=bool(src.get("tie_word_embeddings", default=False)),
        lm_head_bias=True,
    )


def _map_gpt_neo(src: _Src, what: str) -> Fields:
    h = src.req_int("hidden_size")
    n = src.req_int("num_layers", "num_hidden_layers")
    layers = src.get("attention_layers", default=None)
    if layers is None and src.has("attention_types"):
        layers = []
        for pattern, repeat in src.get("attention_types"):
            layers.extend(list(pattern) * int(repeat))
    if layers is None:
        src.missing.append("attention_types")
        layer_types = None
    else:
        layer_types = ["sliding_attention" if t == "local" else "full_attention" for t in layers]
    window, lt = _attention_layout(layer_types, src.get("window_size", default=256), n, what)
    n_pos = src.req_int("max_position_embeddings")
    return dict(
        num_layers=n, n_head=src.req_int("num_heads", "num_attention_heads"), hidden_dim=h,
        vocab_size=src.req_int("vocab_size"), max_seq_len=n_pos,
        ffn_embed_dim=src.opt_int("intermediate_size", default=None) or (4 * h if h else None),
        activation=_activation(src.get("activation_function", default="gelu_new")),
        qkv_bias=False, attn_out_bias=True, mlp_bias=True,
        norm_type="layernorm", norm_bias=True, position_embedding_type="learned",
        num_position_embeddings=n_pos, sliding_window=window, layer_types=lt,
        tie_word_embeddings=bool(src.get("tie_word_embeddings", default=True)),
    )


def _map_gpt_neox(src: _Src, what: str) -> Fields:
    bias = bool(src.get("attention_bias", default=True))
    return dict(
        num_layers=src.req_int("num_hidden_layers"), n_head=src.req_int("num_attention_heads"),
        hidden_dim=src.req_int("hidden_size"), vocab_size=src.req_int("vocab_size"),
        max_seq_len=_max_seq(src), ffn_embed_dim=src.req_int("intermediate_size"),
        activation=_activation(src.get("hidden_act", default="gelu")),
        qkv_bias=bias, attn_out_bias=bias, mlp_bias=True,
        norm_type="layernorm", norm_bias=True, position_embedding_type="rotary",
        parallel_attn_mlp=bool(src.get("use_parallel_residual", default=True)),
        num_norms_per_layer=2,  # input_layernorm and post_attention_layernorm even when parallel
        tie_word_embeddings=bool(src.get("tie_word_embeddings", default=False)),
    )


def _map_opt(src: _Src, what: str) -> Fields:
    h = src.req_int("hidden_size")
    if not bool(src.get("layer_norm_elementwise_affine", default=True)):
        raise UnmappableConfig(f"{what}: layer_norm_elementwise_affine=False (LayerNorms without "
                               "weights) cannot be described by ModelConfig")
    proj = src.opt_int("word_embed_proj_dim", default=None)
    mpe = src.req_int("max_position_embeddings")
    bias = bool(src.get("enable_bias", default=True))
    pre_ln = bool(src.get("do_layer_norm_before", default=True))
    removed = bool(src.get("_remove_final_layer_norm", default=False))
    return dict(
        num_layers=src.req_int("num_hidden_layers"), n_head=src.req_int("num_attention_heads"),
        hidden_dim=h, vocab_size=src.req_int("vocab_size"), max_seq_len=mpe,
        ffn_embed_dim=src.req_int("ffn_dim"),
        activation=_activation(src.get("activation_function", default="relu")),
        qkv_bias=bias, attn_out_bias=bias, mlp_bias=bias,
        norm_type="layernorm", norm_bias=True, position_embedding_type="learned",
        num_position_embeddings=(mpe + 2) if mpe else None,  # OPTLearnedPositionalEmbedding offset 2
        embedding_dim=proj if proj and proj != h else None,
        final_norm=pre_ln and not removed,
        tie_word_embeddings=bool(src.get("tie_word_embeddings", default=True)),
    )


def _map_bloom(src: _Src, what: str) -> Fields:
    h = src.req_int("hidden_size", "n_embed")
    return dict(
        num_layers=src.req_int("n_layer", "num_hidden_layers"),
        n_head=src.req_int("n_head", "num_attention_heads"),
        hidden_dim=h, vocab_size=src.req_int("vocab_size"),
        max_seq_len=src.opt_int("seq_length", "max_position_embeddings", default=None),
        ffn_embed_dim=4 * h if h else None, activation="gelu_tanh",
        qkv_bias=True, attn_out_bias=True, mlp_bias=True,
        norm_type="layernorm", norm_bias=True, embedding_norm=True,
        position_embedding_type="alibi",
        tie_word_embeddings=bool(src.get("tie_word_embeddings", default=True)),
    )


def _map_bert(src: _Src, what: str) -> Fields:
    pet = src.get("position_embedding_type", default="absolute")
    if pet not in ("absolute", None):
        raise UnmappableConfig(f"{what}: position_embedding_type={pet!r} (relative position "
                               "embeddings) cannot be described by ModelConfig")
    mpe = src.req_int("max_position_embeddings")
    return dict(
        num_layers=src.req_int("num_hidden_layers"), n_head=src.req_int("num_attention_heads"),
        hidden_dim=src.req_int("hidden_size"), vocab_size=src.req_int("vocab_size"),
        max_seq_len=mpe, ffn_embed_dim=src.req_int("intermediate_size"),
        activation=_activation(src.get("hidden_act", default="gelu")),
        qkv_bias=True, attn_out_bias=True, mlp_bias=True,
        norm_type="layernorm", norm_bias=True, embedding_norm=True,
        position_embedding_type="learned", num_position_embeddings=mpe,
        type_vocab_size=src.opt_int("type_vocab_size", default=2),
        encoder_only=True, pooler=True, lm_head=False, final_norm=False,
        tie_word_embeddings=bool(src.get("tie_word_embeddings", default=True)),
    )


def _map_falcon(src: _Src, what: str) -> Fields:
    h = src.req_int("hidden_size", "n_embed")
    heads = src.req_int("num_attention_heads", "n_head")
    new_arch = bool(src.get("new_decoder_architecture", default=False))
    multi_query = bool(src.get("multi_query", default=True))
    parallel = bool(src.get("parallel_attn", default=True))
    if new_arch:
        kv = src.opt_int("num_kv_heads", default=None) or heads
    elif multi_query:
        kv = 1
    else:
        kv = heads
    num_ln = src.opt_int("num_ln_in_parallel_attn", default=None)
    if num_ln is None and new_arch:
        num_ln = 2  # FalconDecoderLayer's default for the new decoder architecture
    if not parallel:
        norms = 2  # input_layernorm + post_attention_layernorm
    else:
        norms = 2 if num_ln == 2 else 1  # ln_attn + ln_mlp, or one shared input_layernorm
    bias = bool(src.get("bias", default=False))
    return dict(
        num_layers=src.req_int("num_hidden_layers", "n_layer"), n_head=heads, hidden_dim=h,
        num_key_value_heads=kv, vocab_size=src.req_int("vocab_size"),
        max_seq_len=_max_seq(src),
        ffn_embed_dim=src.opt_int("ffn_hidden_size", default=None) or (4 * h if h else None),
        activation=_activation(src.get("activation", default="gelu")),
        qkv_bias=bias, attn_out_bias=bias, mlp_bias=bias,
        norm_type="layernorm", norm_bias=True,
        position_embedding_type="alibi" if bool(src.get("alibi", default=False)) else "rotary",
        parallel_attn_mlp=parallel or new_arch, num_norms_per_layer=norms,
        tie_word_embeddings=bool(src.get("tie_word_embeddings", default=True)),
    )


def _llama_like(src: _Src, what: str, *, qkv_bias: bool, out_bias: bool, mlp_bias: bool,
                qk_norm: bool = False, norms: int = 2, act_keys: Tuple[str, ...] = ("hidden_act",),
                default_act: str = "silu", tie_default: bool = False,
                use_layer_types: bool = True) -> Fields:
    """Pre-norm RMSNorm decoder with a gated MLP and rotary positions (Llama and descendants)."""
    n = src.req_int("num_hidden_layers")
    heads = src.req_int("num_attention_heads")
    h = src.req_int("hidden_size")
    layer_types = src.get("layer_types", default=None) if use_layer_types else None
    window, lt = _attention_layout(layer_types, src.get("sliding_window", default=None), n, what)
    f: Fields = dict(
        num_layers=n, n_head=heads, hidden_dim=h,
        num_key_value_heads=src.opt_int("num_key_value_heads", default=None),
        vocab_size=src.req_int("vocab_size"), max_seq_len=_max_seq(src),
        ffn_embed_dim=src.req_int("intermediate_size"),
        mlp_gated_linear_units=True,
        activation=_activation(src.get(*act_keys, default=default_act)),
        head_dim=src.opt_int("head_dim", default=None),
        qkv_bias=qkv_bias, attn_out_bias=out_bias, mlp_bias=mlp_bias, qk_norm=qk_norm,
        norm_type="rmsnorm", norm_bias=False, num_norms_per_layer=norms,
        position_embedding_type="rotary", sliding_window=window, layer_types=lt,
        tie_word_embeddings=bool(src.get("tie_word_embeddings", default=tie_default)),
    )
    return f


def _map_llama(src: _Src, what: str) -> Fields:
    ab = bool(src.get("attention_bias", default=False))
    return _llama_like(src, what, qkv_bias=ab, out_bias=ab,
                       mlp_bias=bool(src.get("mlp_bias", default=False)))


def _map_mistral(src: _Src, what: str) -> Fields:
    # MistralAttention/MistralMLP have no biases; HF Mistral ignores layer_types
    return _llama_like(src, what, qkv_bias=False, out_bias=False, mlp_bias=False,
                       use_layer_types=False)


def _map_phi3(src: _Src, what: str) -> Fields:
    return _llama_like(src, what, qkv_bias=False, out_bias=False, mlp_bias=False,
                       use_layer_types=False)


def _map_qwen2(src: _Src, what: str) -> Fields:
    f = _llama_like(src, what, qkv_bias=True, out_bias=False, mlp_bias=False)  # q/k/v bias, o none
    _qwen_window(src, f, what)
    return f


def _map_qwen3(src: _Src, what: str) -> Fields:
    ab = bool(src.get("attention_bias", default=False))
    f = _llama_like(src, what, qkv_bias=ab, out_bias=ab, mlp_bias=False, qk_norm=True)
    _qwen_window(src, f, what)
    return f


def _qwen_window(src: _Src, f: Fields, what: str) -> None:
    """Qwen2/3 configs carry sliding_window even when use_sliding_window is false; on the
    raw-dict path transformers did not clear it, so do it here."""
    if src.obj is None and not bool(src.raw.get("use_sliding_window", False)):
        f["sliding_window"], f["layer_types"] = None, None
    elif src.obj is None and bool(src.raw.get("use_sliding_window", False)):
        n = f["num_layers"]
        mwl = int(src.raw.get("max_window_layers", 28))
        lt = ["sliding_attention" if i >= mwl else "full_attention" for i in range(n or 0)]
        f["sliding_window"], f["layer_types"] = _attention_layout(
            lt, src.raw.get("sliding_window"), n, what)


def _moe_fields(num_experts: Optional[int], top_k: Optional[int], moe_layers: Iterable[int],
                n: Optional[int], what: str) -> Fields:
    if not num_experts or num_experts <= 1 or n is None:
        return {}
    first, freq = _moe_layout(moe_layers, n, what)
    return dict(moe_num_experts=num_experts, moe_top_k=top_k or 1,
                moe_first_dense_layers=first, moe_layer_freq=freq)


def _qwen_moe_layers(src: _Src, n: Optional[int]) -> List[int]:
    step = src.opt_int("decoder_sparse_step", default=1) or 1
    only = set(src.get("mlp_only_layers", default=[]) or [])
    return [i for i in range(n or 0) if i not in only and (i + 1) % step == 0]


def _map_qwen2_moe(src: _Src, what: str) -> Fields:
    f = _llama_like(src, what, qkv_bias=bool(src.get("qkv_bias", default=True)), out_bias=False,
                    mlp_bias=False)
    _qwen_window(src, f, what)
    n = f["num_layers"]
    f.update(_moe_fields(src.opt_int("num_experts", default=None),
                         src.opt_int("num_experts_per_tok", default=None),
                         _qwen_moe_layers(src, n), n, what))
    if f.get("moe_num_experts", 1) > 1:
        f["moe_ffn_embed_dim"] = src.req_int("moe_intermediate_size")
        shared = src.opt_int("shared_expert_intermediate_size", default=None)
        if shared:
            f.update(moe_num_shared_experts=1, moe_shared_expert_ffn_dim=shared,
                     moe_shared_expert_gate=True)
    return f


def _map_qwen3_moe(src: _Src, what: str) -> Fields:
    ab = bool(src.get("attention_bias", default=False))
    f = _llama_like(src, what, qkv_bias=ab, out_bias=ab, mlp_bias=False, qk_norm=True)
    _qwen_window(src, f, what)
    n = f["num_layers"]
    f.update(_moe_fields(src.opt_int("num_experts", "num_local_experts", default=None),
                         src.opt_int("num_experts_per_tok", default=None),
                         _qwen_moe_layers(src, n), n, what))
    if f.get("moe_num_experts", 1) > 1:
        f["moe_ffn_embed_dim"] = src.req_int("moe_intermediate_size")
    return f


def _map_mixtral(src: _Src, what: str) -> Fields:
    f = _llama_like(src, what, qkv_bias=False, out_bias=False, mlp_bias=False,
                    use_layer_types=False)
    n = f["num_layers"]
    f.update(_moe_fields(src.req_int("num_local_experts", "num_experts"),
                         src.req_int("num_experts_per_tok"), range(n or 0), n, what))
    if f.get("moe_num_experts", 1) > 1:
        f["moe_ffn_embed_dim"] = f["ffn_embed_dim"]  # each expert is a full-width SwiGLU MLP
    return f


def _map_gemma(src: _Src, what: str) -> Fields:
    ab = bool(src.get("attention_bias", default=False))
    return _llama_like(src, what, qkv_bias=ab, out_bias=ab, mlp_bias=False,
                       act_keys=("hidden_activation", "hidden_act"), default_act="gelu_pytorch_tanh",
                       tie_default=True, use_layer_types=False)


def _map_gemma2(src: _Src, what: str) -> Fields:
    ab = bool(src.get("attention_bias", default=False))
    f = _llama_like(src, what, qkv_bias=ab, out_bias=ab, mlp_bias=False, norms=4,
                    act_keys=("hidden_activation", "hidden_act"), default_act="gelu_pytorch_tanh",
                    tie_default=True)
    if src.obj is None and not src.has("layer_types") and f["num_layers"]:
        f["sliding_window"], f["layer_types"] = _attention_layout(
            ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(f["num_layers"])],
            src.get("sliding_window", default=4096), f["num_layers"], what)
    return f


def _map_gemma3_text(src: _Src, what: str) -> Fields:
    ab = bool(src.get("attention_bias", default=False))
    f = _llama_like(src, what, qkv_bias=ab, out_bias=ab, mlp_bias=False, norms=4, qk_norm=True,
                    act_keys=("hidden_activation", "hidden_act"), default_act="gelu_pytorch_tanh",
                    tie_default=True)
    if src.obj is None and not src.has("layer_types") and f["num_layers"]:
        pattern = src.opt_int("sliding_window_pattern", default=6) or 6
        f["sliding_window"], f["layer_types"] = _attention_layout(
            ["sliding_attention" if (i + 1) % pattern else "full_attention"
             for i in range(f["num_layers"])],
            src.get("sliding_window", default=4096), f["num_layers"], what)
    return f


def _map_deepseek(src: _Src, what: str) -> Fields:
    n = src.req_int("num_hidden_layers")
    heads = src.req_int("num_attention_heads")
    ab = bool(src.get("attention_bias", default=False))
    f: Fields = dict(
        num_layers=n, n_head=heads, hidden_dim=src.req_int("hidden_size"),
        num_key_value_heads=heads,  # MLA: every head has its own (decompressed) key and value
        vocab_size=src.req_int("vocab_size"), max_seq_len=_max_seq(src),
        ffn_embed_dim=src.req_int("intermediate_size"), mlp_gated_linear_units=True,
        activation=_activation(src.get("hidden_act", default="silu")),
        qkv_bias=ab, attn_out_bias=ab, mlp_bias=bool(src.get("mlp_bias", default=False)),
        norm_type="rmsnorm", norm_bias=False, position_embedding_type="rotary",
        q_lora_rank=src.opt_int("q_lora_rank", default=None),
        kv_lora_rank=src.req_int("kv_lora_rank"),
        qk_nope_head_dim=src.req_int("qk_nope_head_dim"),
        qk_rope_head_dim=src.req_int("qk_rope_head_dim"),
        v_head_dim=src.req_int("v_head_dim"),
        tie_word_embeddings=bool(src.get("tie_word_embeddings", default=False)),
    )
    f["head_dim"] = (f["qk_nope_head_dim"] + f["qk_rope_head_dim"]
                     if f["qk_nope_head_dim"] and f["qk_rope_head_dim"] else None)
    experts = src.opt_int("n_routed_experts", default=None)
    if experts and experts > 1:
        first_k = src.opt_int("first_k_dense_replace", default=0) or 0
        freq = src.opt_int("moe_layer_freq", default=1) or 1
        # DeepSeek's reference code: MoE iff layer_idx >= first_k_dense_replace and layer_idx % freq == 0
        layers = [i for i in range(n or 0) if i >= first_k and i % freq == 0]
        f.update(_moe_fields(experts, src.req_int("num_experts_per_tok"), layers, n, what))
        f["moe_ffn_embed_dim"] = src.req_int("moe_intermediate_size")
        shared = src.opt_int("n_shared_experts", default=0) or 0
        if shared:
            # HF builds one MLP of width n_shared * moe_intermediate_size: same shapes as
            # n_shared experts of moe_intermediate_size each
            f.update(moe_num_shared_experts=shared, moe_shared_expert_ffn_dim=f["moe_ffn_embed_dim"])
    return f


def _map_gpt_oss(src: _Src, what: str) -> Fields:
    ab = bool(src.get("attention_bias", default=True))
    f = _llama_like(src, what, qkv_bias=ab, out_bias=ab, mlp_bias=False)
    n = f["num_layers"]
    if src.obj is None and not src.has("layer_types") and n:
        f["sliding_window"], f["layer_types"] = _attention_layout(
            ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)],
            src.get("sliding_window", default=128), n, what)
    f.update(_moe_fields(src.req_int("num_local_experts", "num_experts"),
                         src.req_int("num_experts_per_tok", "experts_per_token"), range(n or 0),
                         n, what))
    f.update(attn_sinks=True, moe_router_bias=True, moe_expert_bias=True,
             moe_ffn_embed_dim=f["ffn_embed_dim"])
    return f


_FAMILIES: Dict[str, Callable[[_Src, str], Fields]] = {
    "gpt2": _map_gpt2, "gpt_bigcode": _map_gpt_bigcode, "gptj": _map_gptj,
    "gpt_neo": _map_gpt_neo, "gpt_neox": _map_gpt_neox, "opt": _map_opt, "bloom": _map_bloom,
    "bert": _map_bert, "roberta": _map_bert, "xlm-roberta": _map_bert,
    "falcon": _map_falcon,
    "llama": _map_llama, "mistral": _map_mistral, "phi3": _map_phi3,
    "qwen2": _map_qwen2, "qwen3": _map_qwen3, "qwen2_moe": _map_qwen2_moe,
    "qwen3_moe": _map_qwen3_moe, "mixtral": _map_mixtral,
    "gemma": _map_gemma, "gemma2": _map_gemma2, "gemma3_text": _map_gemma3_text,
    "deepseek_v2": _map_deepseek, "deepseek_v3": _map_deepseek, "gpt_oss": _map_gpt_oss,
}

#: model types mapped family by family (others go through the generic mapping)
SUPPORTED_MODEL_TYPES = tuple(sorted(_FAMILIES)) + ("gemma3",)


def _map_generic(src: _Src, what: str) -> Fields:
    """Unknown family: read the common keys; architecture details are inferred from
    hints in the config and logged as assumptions."""
    n = src.req_int("num_hidden_layers", "n_layer", "num_layers")
    heads = src.req_int("num_attention_heads", "n_head", "num_heads")
    h = src.req_int("hidden_size", "n_embd", "d_model")
    vocab = src.req_int("vocab_size")
    rms = src.has("rms_norm_eps")
    act = src.get("hidden_act", "hidden_activation", "activation_function", default=None)
    gated = rms and isinstance(act, str) and act.lower() in ("silu", "swish", "gelu_pytorch_tanh")
    rotary = any(src.has(k) for k in ("rope_theta", "rope_parameters", "rope_scaling", "rotary_dim",
                                      "partial_rotary_factor", "rotary_pct"))
    mpe = src.opt_int("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                      default=None)
    bias_default = not rms
    ab = bool(src.get("attention_bias", "bias", default=bias_default))
    window, lt = _attention_layout(src.get("layer_types", default=None),
                                   src.get("sliding_window", default=None), n, what)
    f: Fields = dict(
        num_layers=n, n_head=heads, hidden_dim=h, vocab_size=vocab, max_seq_len=mpe,
        num_key_value_heads=src.opt_int("num_key_value_heads", default=None),
        ffn_embed_dim=src.opt_int("intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size",
                                  default=None),
        head_dim=src.opt_int("head_dim", default=None),
        mlp_gated_linear_units=bool(gated), activation=_activation(act or "gelu"),
        qkv_bias=ab, attn_out_bias=ab, mlp_bias=bool(src.get("mlp_bias", "bias", default=bias_default)),
        norm_type="rmsnorm" if rms else "layernorm", norm_bias=not rms,
        position_embedding_type="rotary" if rotary else ("learned" if mpe else "none"),
        sliding_window=window, layer_types=lt,
        tie_word_embeddings=bool(src.get("tie_word_embeddings", default=True)),
    )
    experts = src.opt_int("num_local_experts", "num_experts", "n_routed_experts", default=None)
    if experts and experts > 1 and n:
        f.update(_moe_fields(experts, src.req_int("num_experts_per_tok"), range(n), n, what))
        mi = src.opt_int("moe_intermediate_size", default=None)
        if mi:
            f["moe_ffn_embed_dim"] = mi
    if not src.missing:
        logger.warning(
            "%s: model_type %r has no dedicated mapping; assumed %s, %s MLP (%s), %s positions, "
            "%s biases. Check the result against the model code.", what,
            src.raw.get("model_type"), f["norm_type"],
            "gated" if f["mlp_gated_linear_units"] else "non-gated", f["activation"],
            f["position_embedding_type"], "with" if ab else "no")
    return f


# ---------------------------------------------------------------------------
# driver
# ---------------------------------------------------------------------------

def _map(d: Dict[str, Any], *, name: str, source: str, what: str, trust_remote_code: bool,
         revision: Optional[str]) -> ModelConfig:
    model_type = d.get("model_type")
    obj = _transformers_config(d, name=name, revision=revision,
                               trust_remote_code=trust_remote_code, what=what)
    raw = d
    top_tie = d.get("tie_word_embeddings")
    mt = getattr(obj, "model_type", None) or model_type

    # multimodal wrappers (Gemma 3, LLaVA-style): the language model is text_config
    text_cfg = getattr(obj, "text_config", None) if obj is not None else None
    if text_cfg is None and isinstance(d.get("text_config"), dict) and "num_hidden_layers" not in d:
        text_cfg = d["text_config"]
    if text_cfg is not None and mt not in _FAMILIES:
        if isinstance(text_cfg, dict):
            raw = dict(text_cfg)
            sub_obj = _transformers_config(raw, name=name, revision=None, trust_remote_code=False,
                                           what=what) if raw.get("model_type") else None
        else:
            sub_obj = text_cfg
            try:
                raw = text_cfg.to_dict()
            except Exception:
                raw = {}
        obj = sub_obj
        mt = getattr(sub_obj, "model_type", None) or raw.get("model_type") or (
            "gemma3_text" if model_type == "gemma3" else None)
        logger.info("%s is a multimodal %r config; mapping its language model (%r) only",
                    what, model_type, mt)

    src = _Src(obj, raw)
    mapper = _FAMILIES.get(mt) if isinstance(mt, str) else None
    try:
        fields = (mapper or _map_generic)(src, what)
    except HubImportError:
        raise
    except (TypeError, ValueError, KeyError, IndexError) as exc:  # malformed attribute values
        raise UnmappableConfig(f"Cannot map the config of {what} (model_type {model_type!r}): "
                               f"{type(exc).__name__}: {exc}") from None
    if src.missing:
        missing = sorted(set(src.missing))
        raise UnmappableConfig(
            f"Cannot map the config of {what} (model_type {model_type!r}): it lacks the attribute"
            f"{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    if top_tie is not None and raw is not d:
        fields["tie_word_embeddings"] = bool(top_tie)
    fields = {k: v for k, v in fields.items() if v is not None}
    fields.update(name=name, source=source, model_type=str(model_type) if model_type else None)
    if fields["model_type"] is None:
        fields.pop("model_type")
    try:
        return build_config(ModelConfig, fields, source=None)
    except ConfigError as exc:
        raise UnmappableConfig(f"The config of {what} (model_type {model_type!r}) maps to an "
                               f"invalid ModelConfig: {exc}") from None
