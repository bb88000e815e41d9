"""Run a `fire` command line so that bad input ends in one readable line and exit
code 2, never a traceback (unless --debug or log_level=DEBUG is given); help goes
to stdout, logs and errors to stderr."""

from __future__ import annotations

import io
import logging
import numbers
import re
import sys
import traceback
from typing import List, Optional

from llm_analysis.errors import ConfigError, LLMAnalysisError

_HELP_FLAGS = ("--help", "-h")
# Flags that name the same input in different commands: `serve` takes a request's lengths as
# input_len / output_len, `infer` and `plan infer` as seq_len / num_tokens_to_generate (the mirrored
# system's names); `plan` tries several GPUs and data types. A flag given to the command that spells
# it the other way is pointed at that command's spelling (spelling alone would not find it).
SAME_INPUT = (("input_len", "seq_len"), ("output_len", "num_tokens_to_generate"),
              ("gpu_name", "gpu_names"), ("dtype_name", "dtype_names"))


def _wants_debug(argv: List[str]) -> bool:
    joined = " ".join(argv).lower()
    return "--debug" in argv or "log_level=debug" in joined.replace("--", "").replace(" ", "=")


def _help_requested(argv: List[str]) -> bool:
    return any(a in _HELP_FLAGS for a in argv)


def _command_function(component, argv: List[str]):
    """The function `argv` calls on `component` (a dict or class of commands), if any."""
    if not argv or argv[0].startswith("-"):
        return None, None
    name = argv[0]
    fn = component.get(name) if isinstance(component, dict) else getattr(component, name, None)
    if isinstance(fn, type):  # a group of commands (`plan infer`): descend into it
        sub, sub_fn = _command_function(fn(), argv[1:])
        return (f"{name} {sub}", sub_fn) if sub_fn is not None else (None, None)
    return (name, fn) if callable(fn) else (None, None)


def _unknown_flag(component, argv: List[str], prog: str) -> Optional[str]:
    """A message for the first --flag the command does not take (fire would run the
    command with the other flags first and complain only afterwards)."""
    import difflib
    import inspect

    name, fn = _command_function(component, argv)
    if fn is None:
        return None
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return None
    known = set(params)
    skip = len(name.split())  # the command words (`infer`, or `plan infer`)
    args = argv[skip:argv.index("--")] if "--" in argv else argv[skip:]
    for arg in args:
        if not arg.startswith("--") or arg in _HELP_FLAGS:
            continue
        flag = arg[2:].split("=", 1)[0].replace("-", "_")
        if flag in known or (flag.startswith("no") and flag[2:] in known):
            continue
        near = [other for pair in SAME_INPUT if flag in pair for other in pair if other != flag and other in known] \
            or difflib.get_close_matches(flag, sorted(known), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join('--' + n for n in near)}?" if near else ""
        return (f"{prog} {name}: error: unknown flag --{flag}.{hint} "
                f"`{prog} {name} --help` lists every flag.")
    return None


# Flags that hold names (catalogue names, Hub ids, paths): fire reads `--gpu_name 4090` as the int 4090 and
# `--dtype_names 16,fp8` as (16, 'fp8'), losing the text a name lookup needs (`4090` is as much a name as
# `rtx-4090`: the lookup answers with the names closest to it). Their values reach the command as typed.
NAME_FLAGS = frozenset(("name", "model_name", "gpu_name", "dtype_name", "gpu_names", "dtype_names",
                        "kv_cache_dtype"))


def _is_flag(arg: str) -> bool:
    """fire's own test (core._IsFlag): `--x`, `-x`; `-1` is a value."""
    return arg.startswith("--") or re.match(r"^-[a-zA-Z]", arg) is not None


def _as_text(value: str) -> str:
    """`value` as fire will hand it over unchanged: a number (or a comma list with one, fire's tuple syntax)
    written as a Python string literal, which fire's parser evaluates back to this very text. A bracketed list
    (`[a,b]`) is left to fire: its items are read one by one by the command (planner `_names`)."""
    from fire import parser

    parsed = parser.DefaultParseValue(value)
    has_number = isinstance(parsed, numbers.Number) and not isinstance(parsed, bool)
    in_bare_tuple = isinstance(parsed, tuple) and not value.lstrip().startswith(("[", "(")) and \
        any(isinstance(v, numbers.Number) and not isinstance(v, bool) for v in parsed)
    return repr(value) if has_number or in_bare_tuple else value


def _names_kept_as_text(component, argv: List[str]) -> List[str]:
    """`argv` with each value of a NAME_FLAGS parameter made fire-proof (_as_text), whether given as
    `--flag value`, `--flag=value`, a short flag (`-g 4090`: fire's rule, the one parameter starting with
    that letter) or positionally (`plan infer MODEL GPUS`: fire fills the parameters not given as flags,
    in order)."""
    import inspect

    name, fn = _command_function(component, argv)
    if fn is None:
        return argv
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return argv
    out = list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    given, positional = set(), []
    i = len(name.split())
    while i < cut:
        arg = argv[i]
        if not _is_flag(arg):
            positional.append(i)
            i += 1
            continue
        key = arg.lstrip("-").split("=", 1)[0].replace("-", "_")
        if key not in params and len(key) == 1:
            starting = [p for p in params if p.startswith(key)]
            key = starting[0] if len(starting) == 1 else key
        given.add(key)
        if "=" in arg:
            if key in NAME_FLAGS:
                head, value = arg.split("=", 1)
                out[i] = f"{head}={_as_text(value)}"
            i += 1
        elif i + 1 < cut and not _is_flag(argv[i + 1]):  # `--flag value`
            if key in NAME_FLAGS:
                out[i + 1] = _as_text(argv[i + 1])
            i += 2
        else:  # a switch (`--exact`)
            i += 1
    for index, param in zip(positional, [p for p in params if p not in given]):
        if param in NAME_FLAGS:
            out[index] = _as_text(argv[index])
    return out


# while run_fire captures stderr (fire's own usage text), our log handler writes here
_LOG_STREAM = None
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run_fire(component, argv: Optional[List[str]] = None, prog: str = "llm-analysis") -> int:
    """Run `component` through fire with `argv`; returns the exit code.

    - our errors (LLMAnalysisError: unknown names, impossible layouts, a model
      that does not fit, bad values) print `<prog>: error: <message>` on stderr
      and return 2; with --debug / log_level DEBUG the traceback is printed too;
    - fire's own usage errors (unknown command, a value fire cannot consume) are
      reduced to one line naming the problem and the `--help` to read; exit 2;
    - --help prints fire's help on stdout (fire writes it to stderr) and returns 0.

    Fire's stderr output is captured to do so; our log records bypass the capture
    (configure_logging) and anything else written to stderr is passed on.
    """
    import fire

    global _LOG_STREAM
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = _wants_debug(argv)
    argv = [a for a in argv if a != "--debug"]
    # -h is help (fire would take it as the short form of a flag starting with h, e.g. --hbm_memory_efficiency)
    cut = argv.index("--") if "--" in argv else len(argv)
    argv = ["--help" if a == "-h" and i < cut else a for i, a in enumerate(argv)]
    message = _unknown_flag(component, argv, prog)
    if message:
        print(message, file=sys.stderr)
        return 2
    argv = _names_kept_as_text(component, argv)
    captured, real_stderr = io.StringIO(), sys.stderr
    _LOG_STREAM, sys.stderr = real_stderr, captured
    try:
        fire.Fire(component, command=argv, name=prog)
    except LLMAnalysisError as err:
        sys.stderr = real_stderr
        if debug:
            traceback.print_exc()
        print(f"{prog}: error: {err}", file=real_stderr)
        return 2
    except fire.core.FireExit as exc:  # --help, or fire's own usage errors
        sys.stderr = real_stderr
        code, text = int(exc.code or 0), _ANSI.sub("", captured.getvalue())
        captured = io.StringIO()  # consumed here
        if code == 2 and "ERROR:" in text:
            real_stderr.write(text[:text.index("ERROR:")])  # what came before fire's error (warnings)
            print(_usage_error(exc, component, argv, prog), file=real_stderr)
        elif _help_requested(argv):
            text = "".join(line for line in text.splitlines(keepends=True)
                           if not line.startswith("INFO: Showing help with the command"))
            # fire offers a flag's first letter as its short form when no other flag shares it; `-h` is
            # help here (above), so `-h, --html` would promise what it does not do
            text = re.sub(r"(?m)^(\s+)-h, (--\w+)", r"\1\2", text)
            text = _unambiguous_short_flags(text)
            (sys.stdout if code == 0 else real_stderr).write(text.lstrip("\n"))
        else:
            real_stderr.write(text)
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `llm-analysis infer | head`: the reader left
        import os
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout at exit
        return 0
    finally:
        sys.stderr, _LOG_STREAM = real_stderr, None
        real_stderr.write(captured.getvalue())  # warnings and the like, passed on
    return 0


def _unambiguous_short_flags(text: str) -> str:
    """The help with no short flag whose letter another argument also starts with: fire's help offers `-t, --top`
    when only one flag starts with t, but its parser counts the positional arguments too (`plan train`'s
    TOTAL_NUM_TOKENS), and refused `-t 1` as ambiguous."""
    # the arguments' own lines: flags (`    -s, --seq_len=SEQ_LEN`, `    --top=TOP`) and positional arguments
    # (`    TOTAL_NUM_TOKENS`), not flags named in a description
    names = set(re.findall(r"(?m)^[ \t]+(?:-\w, )?--(\w+)[=\s]", text))
    names |= {n.lower() for n in re.findall(r"(?m)^[ \t]+([A-Z][A-Z0-9_]+)[ \t]*$", text)}

    def keep(m) -> str:
        shared = any(other != m["name"] and other.startswith(m["letter"]) for other in names)
        return m["indent"] + m["long"] if shared else m[0]
    return re.sub(r"(?m)^(?P<indent>[ \t]+)-(?P<letter>\w), (?P<long>--(?P<name>\w+))", keep, text)


def _member(component, name: str):
    return component.get(name) if isinstance(component, dict) else getattr(component, name, None)


def _commands(component) -> List[str]:
    if isinstance(component, dict):
        return sorted(component)
    return sorted(n for n in dir(component) if not n.startswith("_") and callable(getattr(component, n)))


def _usage_error(exc, component, argv: List[str], prog: str) -> str:
    """One line for a usage error fire found (its own text is several lines of usage)."""
    try:
        problem = exc.trace.elements[-1].ErrorAsStr()
    except Exception:  # pragma: no cover - fire's trace API changed
        problem = "invalid command line"
    stray = problem[len("Could not consume arg: "):] if problem.startswith("Could not consume arg:") else None
    name, _ = _command_function(component, argv)
    if name is None:
        words = []  # descend into groups of commands (`plan infer`)
        while len(words) < len(argv) and isinstance(_member(component, argv[len(words)]), type):
            component = _member(component, argv[len(words)])()
            words.append(argv[len(words)])
        where = " ".join([prog, *words])
        if stray is not None and len(argv) > len(words) and stray == argv[len(words)]:
            return (f"{where}: error: unknown command {stray!r}; the commands are "
                    f"{', '.join(_commands(component))}. `{where} --help` describes them.")
        return f"{where}: error: {' '.join(problem.split())}. `{where} --help` describes the commands."
    if stray is not None:
        return (f"{prog} {name}: error: unexpected argument {stray!r} (a stray value, a repeated flag, "
                f"or a value starting with '-': write --flag=-1). `{prog} {name} --help` lists every flag.")
    return f"{prog} {name}: error: {' '.join(problem.split())}. `{prog} {name} --help` lists every flag."


class _WarningsForTheReport(logging.Filter):
    """On the command line's stderr handler: warnings are kept for the report's
    Warnings block and the JSON's `warnings` instead of being printed; other records pass."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: List[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING:
            return True
        self.messages.append(record.getMessage())  # (the report merges them, once each)
        return False


class _OnceEach(logging.Filter):
    """On the command line's stderr handler: a warning printed once per run, however many analyses log it
    (a planner builds one per candidate, each warning of the same GPU or dtype)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        message = record.getMessage()
        if message in self.seen:
            return False
        self.seen.add(message)
        return True


_REPORT_WARNINGS: Optional[_WarningsForTheReport] = None


def write_stdout(text: str) -> None:
    """print(), but never failing on a terminal that cannot encode the report."""
    try:
        print(text)
    except UnicodeEncodeError:
        enc = getattr(sys.stdout, "encoding", None) or "ascii"
        print(text.encode(enc, "replace").decode(enc))


def warnings_for_the_report() -> List[str]:
    """The warnings logged since configure_logging(..., warnings_in_report=True)."""
    return list(_REPORT_WARNINGS.messages) if _REPORT_WARNINGS is not None else []


def configure_logging(log_level: str = "INFO", warnings_in_report: bool = False) -> None:
    """Send this package's log records to stderr at `log_level` (stdout stays for
    the report or the JSON summary). With `warnings_in_report` (infer, train: their report
    and JSON carry a warnings list) warnings are kept for it instead, unless log_level is
    DEBUG (then everything also goes to stderr)."""
    global _REPORT_WARNINGS
    from llm_analysis.units import LOG_FORMAT
    from llm_analysis.errors import ConfigError

    level = getattr(logging, str(log_level).upper(), None)
    if not isinstance(level, int):
        raise ConfigError(f"log_level = {log_level!r} is not valid; use one of DEBUG, INFO, WARNING, ERROR")
    logger = logging.getLogger("llm_analysis")
    for h in list(logger.handlers):
        if getattr(h, "_llm_analysis_cli", False):
            logger.removeHandler(h)
    handler = logging.StreamHandler(_LOG_STREAM or sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler._llm_analysis_cli = True  # type: ignore[attr-defined]
    _REPORT_WARNINGS = _WarningsForTheReport() if warnings_in_report and level > logging.DEBUG else None
    if _REPORT_WARNINGS is not None:
        handler.addFilter(_REPORT_WARNINGS)
    handler.addFilter(_OnceEach())
    logger.addHandler(handler)
    logger.setLevel(level)
    logging.captureWarnings(True)  # warnings.warn(...) -> the py.warnings logger (stderr), never stdout


def perf_model_arg(perf_model, gpu_profile, rates_given: bool = False) -> str:
    """--perf_model roofline|calibrated and --gpu_profile FILE -> LLMAnalysis(perf_model=...).

    No --perf_model: expected times (calibrated), since a lower bound read as a forecast misleads;
    but a command line that states its own efficiencies or achieved rates asks for the roofline
    at those rates, so it gets the roofline."""
    if perf_model is None:
        perf_model = "roofline" if rates_given and gpu_profile is None else "calibrated"
    if gpu_profile is None:
        return perf_model
    # the file is read (and checked) by the analysis; what is not a .json path by the analysis' own rule
    # (cost/calibrated.py check_perf_model: a number, a dict the command line parsed, a perf_model name) is
    # named here as the flag the user gave
    if not (isinstance(gpu_profile, str) and gpu_profile.endswith(".json")):
        raise ConfigError(f"--gpu_profile = {gpu_profile!r}: valid: the path of a profile .json file (a calibration "
                          "profile, e.g. saved from llm_analysis.calibrate); --perf_model names the built-in models")
    if perf_model not in ("roofline", "calibrated"):
        raise ConfigError(f"--perf_model {perf_model!r} with --gpu_profile: give one or the other")
    return str(gpu_profile)
