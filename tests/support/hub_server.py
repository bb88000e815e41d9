"""A loopback stand-in for the Hugging Face Hub's file-download protocol, and a
client runner that calls llm_analysis in a fresh interpreter.

Server: just enough of the Hub for `huggingface_hub.hf_hub_download`, as read from
its source (`file_download.get_hf_file_metadata`, `utils/_http.hf_raise_for_status`):

* `HEAD|GET /{repo_id}/resolve/{revision}/{filename}` answers like huggingface.co for
  a small (non-LFS) file: `307` to `/api/resolve-cache/models/{repo_id}/{commit}/{filename}`
  with `X-Repo-Commit` and `ETag`; that URL answers `200` with `ETag` (the git blob
  sha1), `X-Repo-Commit`, `Content-Length` and, for GET, the bytes.
* errors carry the headers the client maps to exception classes: `X-Error-Code:
  RepoNotFound` (401, as the Hub answers anonymous users), `GatedRepo` (401 without a
  token, 403 with a token lacking access), `RevisionNotFound` (404), `EntryNotFound` (404).

It binds 127.0.0.1 on a free port, serves from daemon threads, records every
request, and shuts itself down after `max_lifetime` seconds even if nobody stops it.

Client (`python hub_server.py client`): reads a JSON list of operations on stdin,
runs them with llm_analysis, and prints one JSON result per operation. Run it with
HF_ENDPOINT / HF_HOME / HF_HUB_OFFLINE in its environment: huggingface_hub reads
those when it is imported.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Optional, Set, Tuple
from urllib.parse import quote, unquote, urlsplit


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def commit_sha(repo_id: str, revision: str) -> str:
    return hashlib.sha1(f"commit {repo_id}@{revision}".encode()).hexdigest()


class FakeHub:
    """repos: {repo_id: {revision: {filename: bytes}}}."""

    def __init__(self, repos: Dict[str, Dict[str, Dict[str, bytes]]], *,
                 gated: Optional[Dict[str, Set[str]]] = None, max_lifetime: float = 120.0,
                 hub_like: bool = True):
        self.repos = repos
        self.gated = gated or {}  # repo_id -> tokens with access
        self.max_lifetime = max_lifetime
        self.hub_like = hub_like  # False: a plain web server without the Hub headers
        self.requests: List[Tuple[str, str, Optional[str]]] = []
        self._lock = threading.Lock()
        self._server: Optional[ThreadingHTTPServer] = None
        self._timer: Optional[threading.Timer] = None
        # commit -> (repo_id, revision)
        self.commits: Dict[Tuple[str, str], str] = {}
        for repo_id, revs in repos.items():
            for rev in revs:
                self.commits[(repo_id, rev)] = commit_sha(repo_id, rev)

    # -- lifecycle ----------------------------------------------------------
    def start(self) -> str:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output clean
                pass

            def do_HEAD(self):
                hub._handle(self, head=True)

            def do_GET(self):
                hub._handle(self, head=False)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        self._timer = threading.Timer(self.max_lifetime, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self.endpoint

    @property
    def endpoint(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        srv, self._server = self._server, None
        if srv is not None:
            srv.shutdown()
            srv.server_close()
        if self._timer is not None:
            self._timer.cancel()

    def __enter__(self) -> "FakeHub":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- protocol -------------------------------------------------------------
    def _send(self, h: BaseHTTPRequestHandler, status: int, headers: Dict[str, str],
              body: bytes, head: bool) -> None:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head and body:
            h.wfile.write(body)

    def _error(self, h, status: int, code: Optional[str], message: str, head: bool,
               extra: Optional[Dict[str, str]] = None) -> None:
        headers = {"Content-Type": "application/json"}
        if code:
            headers["X-Error-Code"] = code
        headers["X-Error-Message"] = message
        headers.update(extra or {})
        self._send(h, status, headers, json.dumps({"error": message}).encode(), head)

    def _handle(self, h: BaseHTTPRequestHandler, head: bool) -> None:
        path = urlsplit(h.path).path
        auth = h.headers.get("Authorization")
        with self._lock:
            self.requests.append(("HEAD" if head else "GET", path, auth))
        if not self.hub_like:
            self._send(h, 200, {"Content-Type": "text/html"}, b"<html>portal</html>", head)
            return
        if path.startswith("/api/resolve-cache/models/"):
            return self._serve_blob(h, path[len("/api/resolve-cache/models/"):], head)
        if "/resolve/" not in path:
            return self._error(h, 404, None, "Not Found", head)
        repo_id, _, rest = path.lstrip("/").partition("/resolve/")
        repo_id = unquote(repo_id)
        revision, _, filename = rest.partition("/")
        revision, filename = unquote(revision), unquote(filename)
        if repo_id not in self.repos:
            return self._error(h, 401, "RepoNotFound", "Repository not found", head)
        if repo_id in self.gated:
            token = auth[len("Bearer "):] if auth and auth.startswith("Bearer ") else None
            if token is None:
                return self._error(
                    h, 401, "GatedRepo",
                    f"Access to model {repo_id} is restricted. You must have access to it and be "
                    "authenticated to access it. Please log in.", head)
            if token not in self.gated[repo_id]:
                return self._error(
                    h, 403, "GatedRepo",
                    f"Access to model {repo_id} is restricted and you are not in the authorized "
                    "list. Visit the model page to ask for access.", head)
        commit = self._resolve_revision(repo_id, revision)
        if commit is None:
            return self._error(h, 404, "RevisionNotFound", f"Invalid rev id: {revision}", head)
        files = self.repos[repo_id][self._revision_of(repo_id, commit)]
        if filename not in files:
            return self._error(h, 404, "EntryNotFound", "Entry not found", head,
                               {"X-Repo-Commit": commit})
        data = files[filename]
        location = f"/api/resolve-cache/models/{repo_id}/{commit}/{quote(filename)}"
        self._send(h, 307, {"Location": location, "X-Repo-Commit": commit,
                            "ETag": f'"{git_blob_sha1(data)}"', "Content-Type": "text/plain"},
                   b"", head)

    def _resolve_revision(self, repo_id: str, revision: str) -> Optional[str]:
        if revision in self.repos[repo_id]:
            return self.commits[(repo_id, revision)]
        for (r, _rev), c in self.commits.items():
            if r == repo_id and c == revision:
                return c
        return None

    def _revision_of(self, repo_id: str, commit: str) -> str:
        for (r, rev), c in self.commits.items():
            if r == repo_id and c == commit:
                return rev
        raise KeyError(commit)

    def _serve_blob(self, h, rest: str, head: bool) -> None:
        # rest = {repo_id}/{commit}/{filename}; repo_id may contain one '/'
        parts = rest.split("/")
        for cut in (2, 1):
            repo_id = "/".join(parts[:cut])
            if repo_id in self.repos and len(parts) > cut + 1:
                commit, filename = parts[cut], unquote("/".join(parts[cut + 1:]))
                try:
                    files = self.repos[repo_id][self._revision_of(repo_id, commit)]
                except KeyError:
                    break
                if filename in files:
                    data = files[filename]
                    return self._send(h, 200, {"ETag": f'"{git_blob_sha1(data)}"',
                                               "X-Repo-Commit": commit,
                                               "Content-Type": "application/json"}, data, head)
        self._error(h, 404, "EntryNotFound", "Entry not found", head)


# ---------------------------------------------------------------------------
# client runner (executed in a subprocess)
# ---------------------------------------------------------------------------

def _run_op(op: dict) -> dict:
    import llm_analysis.config as lconfig
    import llm_analysis.hub.entry as hf_import

    saved = {k: os.environ.get(k) for k in op.get("env", {})}
    os.environ.update(op.get("env", {}))
    try:
        if op["op"] == "hf":
            cfg = hf_import.get_model_config_from_hf(
                op["name"], revision=op.get("revision"),
                trust_remote_code=op.get("trust_remote_code", False))
        elif op["op"] == "config_hf":
            cfg = lconfig.get_model_config_from_hf(op["name"], revision=op.get("revision"))
        elif op["op"] == "by_name":
            cfg = lconfig.get_model_config_by_name(op["name"], revision=op.get("revision"))
        else:
            raise ValueError(f"unknown op {op['op']!r}")
        return {"ok": cfg.model_dump()}
    except Exception as exc:  # report what a user would see
        tb = "".join(traceback.format_exception(exc))
        frames = [f.filename for f in traceback.extract_tb(exc.__traceback__)]
        return {"error": type(exc).__name__, "frames": frames,
                "mro": [c.__name__ for c in type(exc).__mro__],
                "message": str(exc),
                "chained": exc.__cause__ is not None or (exc.__context__ is not None
                                                         and not exc.__suppress_context__),
                "traceback": tb}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def client_main() -> int:
    ops = json.load(sys.stdin)
    results = [_run_op(op) for op in ops]
    heavy = sorted(m for m in ("torch", "transformers", "huggingface_hub") if m in sys.modules)
    sys.stdout.write("\n@@RESULTS@@" + json.dumps({"results": results, "imported": heavy}) + "\n")
    return 0


if __name__ == "__main__" and sys.argv[1:] == ["client"]:
    raise SystemExit(client_main())
