"""`python -m agent`: the same entry point as the `karmada-agent` console script."""

from agent.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
