"""On-disk cache of exact-verification verdicts, one small JSON file per key.

Where: `$LLM_ANALYSIS_CACHE/exact/` when that variable is set, else
`$XDG_CACHE_HOME/llm_analysis/exact/` (default `~/.cache/llm_analysis/exact/`).

The key hashes everything the verdict depends on: the model id and revision, the
config dict, the ModelConfig when the caller gives one, the version of transformers
(read from package metadata) and the source of the engine modules the verdict is
computed by, and only those (so an edit to the CLI, the timing model or the tables
does not throw the cache away):

* `DERIVED_SOURCES` (the module-tree path, `entry.description_for`): the `exact/`
  package (build, probe, walk, the families' rules in architectures/, verification),
  `model/` (the records whose parameters and FLOPs are compared), the parameter, FLOP
  and phase views, the operator rows the verification sums (quantities/latency.py) and
  the facade that serves them, the ModelConfig schema the description is validated
  into, and the reading of a config.json's quantization_config (hub/quantization.py);
* `MAPPED_SOURCES` (`verify.verify_hf_config`, the table path): those plus the Hub
  import that maps a config.json to a ModelConfig (`hub/`, `config.py`).

A module added to the engine that changes a count must be added to these lists
(tests/exact/test_exact_cache.py checks that every listed path exists, and that every
package module the listed ones import is listed or named as not affecting counts). Computing a key
reads a few dozen small files and imports neither torch nor transformers. A cache
hit is therefore valid as it is; a changed config, engine or library is a different key.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

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
# paths relative to the package; a directory stands for its *.py files, recursively
DERIVED_SOURCES = ("exact", "model", "quantities/params.py", "quantities/flops.py", "quantities/phases.py",
                   "quantities/latency.py", "facade.py", "schema", "hub/model_class.py",
                   "hub/vision.py", "hub/quantization.py")
MAPPED_SOURCES = DERIVED_SOURCES + ("hub", "config.py")
_fingerprints: Dict[Tuple[str, ...], str] = {}


def source_files(sources: Tuple[str, ...], root: Optional[Path] = None) -> List[Path]:
    """The Python files `sources` names under `root` (default: the package), sorted."""
    root = root or _PACKAGE_DIR
    files = set()
    for pattern in sources:
        for path in root.glob(pattern):
            files.update(path.rglob("*.py") if path.is_dir() else [path])
    return sorted(files)


def engine_fingerprint(sources: Tuple[str, ...] = MAPPED_SOURCES, root: Optional[Path] = None) -> str:
    """sha256 of the named engine sources (read once per process and list)."""
    root = root or _PACKAGE_DIR
    memo = (str(root),) + tuple(sources)
    if memo not in _fingerprints:
        h = hashlib.sha256()
        for path in source_files(sources, root):
            h.update(path.relative_to(root).as_posix().encode())
            h.update(path.read_bytes())
        _fingerprints[memo] = h.hexdigest()
    return _fingerprints[memo]


def cache_key(model_id: Optional[str], revision: Optional[str], hf_config: Dict[str, Any],
              engine_config: Optional[Dict[str, Any]], sources: Tuple[str, ...] = MAPPED_SOURCES) -> str:
    payload = json.dumps({"format": FORMAT_VERSION, "model_id": model_id, "revision": revision,
                          "config": hf_config, "engine_config": engine_config,
                          "engine": engine_fingerprint(sources),
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
