"""Run a `fire` command line so that bad input ends in one readable line and exit
code 2, never a traceback (unless --debug or log_level=DEBUG is given)."""

from __future__ import annotations

import logging
import sys
from typing import List, Optional

from .errors import LLMAnalysisError


def _wants_debug(argv: List[str]) -> bool:
    joined = " ".join(argv).lower()
    return "--debug" in argv or "log_level=debug" in joined.replace("--", "").replace(" ", "=")


def run_fire(component, argv: Optional[List[str]] = None, prog: str = "llm-analysis") -> int:
    import fire

    argv = list(sys.argv[1:] if argv is None else argv)
    debug = _wants_debug(argv)
    argv = [a for a in argv if a != "--debug"]
    try:
        fire.Fire(component, command=argv, name=prog)
    except LLMAnalysisError as err:
        if debug:
            raise
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except fire.core.FireExit as exc:  # --help, or fire's own usage errors
        return int(exc.code or 0)
    except KeyboardInterrupt:
        return 130
    return 0


def configure_logging(log_level: str = "INFO") -> None:
    from .constant import LOG_FORMAT
    from .errors import ConfigError

    level = getattr(logging, str(log_level).upper(), None)
    if not isinstance(level, int):
        raise ConfigError(f"log_level {log_level!r} is not valid; use one of DEBUG, INFO, WARNING, ERROR")
    logging.basicConfig(format=LOG_FORMAT, level=level, force=True)
