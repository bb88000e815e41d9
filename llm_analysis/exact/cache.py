"""On-disk cache of exact-verification verdicts, one small JSON file per key.

Where: `$LLM_ANALYSIS_CACHE/exact/` when that variable is set, else
`$XDG_CACHE_HOME/llm_analysis/exact/` (default `~/.cache/llm_analysis/exact/`).

The key hashes everything the verdict depends on: the model id and revision, the
config dict, the ModelConfig when the caller gives one, the engine's code (the
bytes of the package's modules, which decide how a config is mapped and counted)
and the version of transformers (read from package metadata). Computing a key
imports neither torch nor transformers. A cache hit is therefore valid as it is; a
changed config, engine or library is a different key.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any, Dict, Optional

CACHE_ENV = "LLM_ANALYSIS_CACHE"
FORMAT_VERSION = 1


def cache_dir() -> Path:
    root = os.environ.get(CACHE_ENV)
    if root:
        return Path(root).expanduser() / "exact"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "llm_analysis" / "exact"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "absent"


_PACKAGE_DIR = Path(__file__).resolve().parents[1]
_fingerprint: Optional[str] = None


def engine_fingerprint() -> str:
    """sha256 of the package's Python sources (a few hundred kB; read once per process)."""
    global _fingerprint
    if _fingerprint is None:
        h = hashlib.sha256()
        for path in sorted(_PACKAGE_DIR.rglob("*.py")):
            h.update(path.relative_to(_PACKAGE_DIR).as_posix().encode())
            h.update(path.read_bytes())
        _fingerprint = h.hexdigest()
    return _fingerprint


def cache_key(model_id: Optional[str], revision: Optional[str], hf_config: Dict[str, Any],
              engine_config: Optional[Dict[str, Any]]) -> str:
    payload = json.dumps({"format": FORMAT_VERSION, "model_id": model_id, "revision": revision,
                          "config": hf_config, "engine_config": engine_config,
                          "engine": engine_fingerprint(),
                          "transformers": _version("transformers")},
                         sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def load(key: str) -> Optional[Dict[str, Any]]:
    path = cache_dir() / f"{key}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # absent or damaged: recompute
        return None


def store(key: str, record: Dict[str, Any]) -> Optional[Path]:
    """Write atomically (temporary file + rename); an unwritable cache is not an error."""
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(record, fh, sort_keys=True)
        path = directory / f"{key}.json"
        os.replace(tmp, path)
        return path
    except OSError:
        return None
