"""Fetch a model's `config.json` from the Hugging Face Hub with `huggingface_hub` (imported only when a
download is asked for). `hf_hub_download` honours `HF_TOKEN`, `HF_ENDPOINT`, `HF_HUB_OFFLINE`,
`HF_HOME`/`HF_HUB_CACHE` and the standard cache. Every failure becomes a `HubImportError` subclass naming
the model id and revision, with a hint on what to do, not chained (`raise ... from None`).

Bounded wait: `hf_hub_download` retries a failed metadata request (timeouts, network errors, HTTP 5xx)
with exponential back-off and a 60 s timeout when nothing is cached, about 23 s of retries on a Hub that
refuses connections. We first ask for the file's metadata once (`get_hf_file_metadata`, no retries) with
the timeout `hub_timeout_s()`; when that fails transiently the cached copy is used if there is one,
otherwise one error states the wait.
"""

from __future__ import annotations

import math
import os
from typing import Any, Dict, Optional, Tuple

from llm_analysis.hub.errors import (GatedRepo, HubImportError, HubOffline, HubUnreachable, RepoNotFound,
                         RevisionNotFound, describe_model)

__all__ = ["download_config_json", "download_quant_sidecar", "read_json_file", "hub_timeout_s", "TIMEOUT_ENV"]

TIMEOUT_ENV = "LLM_ANALYSIS_HUB_TIMEOUT"
MAX_TIMEOUT_S = 3600.0  # an hour: beyond it a wait is a hang


def download_config_json(name: str, revision: Optional[str]) -> Tuple[str, str]:
    """Fetch `config.json` of a Hub repo; returns (local path, endpoint)."""
    try:
        import huggingface_hub
        from huggingface_hub import constants
    except ImportError:  # pragma: no cover - a declared dependency
        raise HubImportError(
            f"Cannot fetch {describe_model(name, revision)} from the Hugging Face Hub: the "
            "`huggingface_hub` package is not installed (pip install huggingface_hub).") from None
    timeout_s = hub_timeout_s()
    try:
        if not constants.is_offline_mode():
            cached = _probe(name, revision, timeout_s)
            if cached is not None:
                return cached, constants.ENDPOINT
        path = huggingface_hub.hf_hub_download(repo_id=name, filename="config.json", revision=revision,
                                               etag_timeout=timeout_s)
        return path, constants.ENDPOINT
    except HubImportError:
        raise
    except Exception as exc:  # httpx errors (proxy, TLS) and anything else: never a raw traceback
        err = _hub_error(exc, name, revision)
    raise err from None


QUANT_SIDECAR = "hf_quant_config.json"


def download_quant_sidecar(name: str, revision: Optional[str]) -> Tuple[Optional[str], Optional[str]]:
    """(local path, None) of a ModelOpt release's hf_quant_config.json beside its config.json; (None, None)
    when the repository has none; (None, why) when the answer cannot be had (offline, or the Hub failing, with
    no record of the file in the cache): the caller warns, since the quantisation it may hold is then not read.
    vLLM asks for the same file to detect a ModelOpt checkpoint (vLLM docs, features/quantization/modelopt.md).
    Requests: one metadata request without retries (config.json's bounded wait, see `_probe`), then the
    download's own (a second "not found" where the repository has none: huggingface_hub records it in the cache
    only there). The cache answers offline and when the Hub fails: huggingface_hub records a file the Hub said
    it lacks (`try_to_load_from_cache`'s _CACHED_NO_EXIST)."""
    import huggingface_hub
    from huggingface_hub import constants, errors
    why = "offline mode is on (HF_HUB_OFFLINE=1)"
    if not constants.is_offline_mode():
        url = huggingface_hub.hf_hub_url(name, QUANT_SIDECAR, revision=revision)
        try:
            try:  # one request without retries: a failing Hub costs one bounded wait
                huggingface_hub.get_hf_file_metadata(url, timeout=hub_timeout_s())
            except errors.RemoteEntryNotFoundError:
                pass  # the download's own request records "not found" in the cache, for offline imports
            return huggingface_hub.hf_hub_download(repo_id=name, filename=QUANT_SIDECAR, revision=revision,
                                                   etag_timeout=hub_timeout_s()), None
        except errors.RemoteEntryNotFoundError:
            return None, None
        except Exception as exc:  # config.json came: a failure now is stated, never raised
            why = _one_line(exc)
    cached = huggingface_hub.try_to_load_from_cache(name, QUANT_SIDECAR, revision=revision)
    if isinstance(cached, str):
        return cached, None
    if cached is None:
        return None, f"{why}, and the cache holds no answer for it"
    return None, None  # the Hub said, when last asked, that the repository has none


def hub_timeout_s() -> float:
    """Seconds one Hub request may take: LLM_ANALYSIS_HUB_TIMEOUT, else huggingface_hub's
    HF_HUB_ETAG_TIMEOUT (its default: 10 s)."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        from huggingface_hub import constants
        return float(constants.HF_HUB_ETAG_TIMEOUT)
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT_S):
        raise HubImportError(f"{TIMEOUT_ENV}={raw!r} is not a valid Hub timeout: give a number of "
                             f"seconds in (0, {MAX_TIMEOUT_S:g}].")
    return value


def _probe(name: str, revision: Optional[str], timeout_s: float) -> Optional[str]:
    """One metadata request without retries, so an unreachable, slow or failing Hub costs
    at most `timeout_s`. None when it answered (the download follows); on a transient
    failure the cached path, or a HubImportError stating the wait."""
    import huggingface_hub
    from huggingface_hub import errors
    url = huggingface_hub.hf_hub_url(name, "config.json", revision=revision)
    try:
        huggingface_hub.get_hf_file_metadata(url, timeout=timeout_s)
        return None
    except Exception as exc:
        kind = _transient_kind(exc)
        if kind is None:
            raise
        failure = exc
    try:  # what hf_hub_download does after its retries: fall back to the cache
        return huggingface_hub.hf_hub_download(repo_id=name, filename="config.json", revision=revision,
                                               local_files_only=True)
    except (errors.LocalEntryNotFoundError, errors.OfflineModeIsEnabled):
        pass
    raise _transient_error(kind, failure, describe_model(name, revision), timeout_s) from None


def _transient_kind(exc: Exception) -> Optional[str]:
    """'timeout', 'network' or 'server' for the failures huggingface_hub would retry."""
    names = {c.__name__ for c in type(exc).__mro__}
    if any("Timeout" in n for n in names):
        return "timeout"
    if names & {"TransportError", "NetworkError", "RemoteProtocolError", "ConnectionError"}:
        return "network"
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(status, int) and (status >= 500 or status in (408, 429)):
        return "server"
    return None


def _transient_error(kind: str, exc: Exception, what: str, timeout_s: float) -> HubImportError:
    """One line for a failure huggingface_hub would have retried, stating the single wait."""
    from huggingface_hub import constants
    endpoint, wait = constants.ENDPOINT, f"{timeout_s:g} s"
    uncached = (f"it is not in the local cache ({constants.HF_HUB_CACHE}). Try again later, or give "
                "a catalogue name, a local model directory or a config.json path")
    if kind == "server":
        status = exc.response.status_code
        reason = "a server error" if status >= 500 else "the server is busy"
        return HubImportError(f"Cannot fetch config.json of {what}: {endpoint} answered HTTP {status} "
                              f"({reason}; not retried) and {uncached}.")
    if kind == "timeout":
        return HubUnreachable(f"Cannot fetch config.json of {what}: the request to {endpoint} timed out "
                              f"after {wait} ({TIMEOUT_ENV}; raise it for a slow link) and {uncached}.")
    return HubUnreachable(f"Cannot fetch config.json of {what}: the Hub at {endpoint} could not be "
                          f"reached ({_one_line(exc)}; one attempt, waited at most {wait}, {TIMEOUT_ENV}) "
                          f"and {uncached}; check the network, proxy settings and HF_ENDPOINT.")


def _one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def _hub_error(exc: Exception, name: str, revision: Optional[str]) -> HubImportError:
    """Our error for an exception of `hf_hub_download` (checked most specific first)."""
    from huggingface_hub import constants, errors
    what, endpoint, rev = describe_model(name, revision), constants.ENDPOINT, revision or "main"
    if isinstance(exc, errors.GatedRepoError):
        return GatedRepo(f"Cannot fetch config.json of {what}: the repository is gated. "
                         f"{_gated_hint(name, endpoint)}")
    if isinstance(exc, errors.RepositoryNotFoundError):
        return RepoNotFound(
            f"No model repository {name!r} on {endpoint} (revision {rev!r}): it does "
            "not exist, or it is private and no token with access was given (set HF_TOKEN or run "
            "`huggingface-cli login`).")
    if isinstance(exc, errors.RevisionNotFoundError):
        return RevisionNotFound(
            f"Model repository {name!r} exists on {endpoint} but has no revision "
            f"{rev!r} (branch, tag or commit).")
    if isinstance(exc, errors.RemoteEntryNotFoundError):
        return HubImportError(
            f"{what} on {endpoint} has no config.json; it is not a transformers model repository.")
    if isinstance(exc, errors.HFValidationError):
        return RepoNotFound(f"{name!r} is not a valid Hugging Face model id: {exc}")
    if isinstance(exc, errors.LocalEntryNotFoundError):
        return _not_cached_error(exc, what, endpoint)
    if isinstance(exc, errors.OfflineModeIsEnabled):
        return HubOffline(
            f"Cannot fetch config.json of {what}: offline mode is on (HF_HUB_OFFLINE=1) and it is "
            f"not in the local cache ({constants.HF_HUB_CACHE}).")
    if isinstance(exc, errors.HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", "?")
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return HubImportError(
            f"Cannot fetch config.json of {what}: {endpoint} answered HTTP {status} ({first}).")
    if isinstance(exc, OSError):  # cache not writable, disk full, connection errors as OSError
        return HubImportError(f"Cannot fetch config.json of {what}: {type(exc).__name__}: {exc}")
    return HubUnreachable(
        f"Cannot fetch config.json of {what} from {endpoint}: {type(exc).__name__}: {exc}")


def _gated_hint(name: str, endpoint: str) -> str:
    """What to do about a gated repository, given the token situation."""
    import huggingface_hub
    from huggingface_hub import constants
    has_token = huggingface_hub.get_token() is not None
    if has_token and getattr(constants, "HF_HUB_DISABLE_IMPLICIT_TOKEN", False):
        return ("A token is configured but HF_HUB_DISABLE_IMPLICIT_TOKEN=1 stops it from being "
                "sent: unset HF_HUB_DISABLE_IMPLICIT_TOKEN.")
    if has_token:
        return ("A token was found (HF_TOKEN or `huggingface-cli login`) but it has no access: "
                f"request access on {endpoint}/{name} with that account, or use a token of an "
                "account that has it.")
    return ("Accept its terms on the model page, then authenticate: set the HF_TOKEN "
            "environment variable to an access token, or run `huggingface-cli login` "
            "(`hf auth login`).")


def _not_cached_error(exc: Exception, what: str, endpoint: str) -> HubImportError:
    """The file is not in the local cache and could not be fetched: say why."""
    from huggingface_hub import constants, errors
    if isinstance(exc.__cause__, errors.FileMetadataError):
        return HubUnreachable(
            f"Cannot fetch config.json of {what}: {endpoint} answered, but not like a Hugging "
            "Face Hub (no X-Repo-Commit/ETag headers), and the file is not in the local cache "
            f"({constants.HF_HUB_CACHE}). Check HF_ENDPOINT and any proxy or captive portal.")
    if constants.is_offline_mode():
        return HubOffline(
            f"Cannot fetch config.json of {what}: offline mode is on (HF_HUB_OFFLINE=1) and it "
            f"is not in the local cache ({constants.HF_HUB_CACHE}). Unset HF_HUB_OFFLINE to "
            "download it, or give a catalogue name, a local model directory or a config.json path.")
    return HubUnreachable(
        f"Cannot fetch config.json of {what}: the Hub at {endpoint} could not be reached "
        f"and it is not in the local cache ({constants.HF_HUB_CACHE}). Check the network, "
        "proxy settings and HF_ENDPOINT; or give a catalogue name, a local model directory "
        "or a config.json path.")


def read_json_file(path: str | os.PathLike, what: str) -> Dict[str, Any]:
    """The JSON object in `path` (a config.json of `what`), or a HubImportError.

    NaN, Infinity and -Infinity are read as Python's json and transformers read them
    (Nemotron-H's `time_step_limit: [0.0, Infinity]`): a config is refused on what a
    value means, never on syntax transformers accepts; a non-finite size is refused by
    the reader of that key (`source.as_int`)."""
    from llm_analysis.utils import load_json_object
    return load_json_object(path, f"config.json of {what}", HubImportError, allow_non_finite=True)
