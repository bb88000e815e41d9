"""`python -m llm_analysis infer|train ...` and the `llm-analysis` console script."""

from llm_analysis.cli.commands import main

if __name__ == "__main__":
    raise SystemExit(main())
