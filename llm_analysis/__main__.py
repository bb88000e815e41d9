"""`python -m llm_analysis infer|train ...` and the `llm-analysis` console script."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
