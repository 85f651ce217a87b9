"""The agent's idle memory with exactly the image's packages, against its budget.

    python -m bench.image_footprint [--extras exec-auth] [--works 20] [--budget-mib 45]
                                    [--out FILE]

Builds the wheel and installs it, from binary wheels only, into a fresh virtualenv the way the
Dockerfile does (the default image, or the variant with `--extras`), so no development tool
that a library imports when present (rich, for structlog) is in the process. Then runs
bench.agent_latency's measurement with that interpreter: the agent registers, goes Ready and
settles (its idle RSS), applies a burst of Works and settles again. Exits 1 when the idle RSS
exceeds the budget. JSON goes to bench/results/image_footprint.json.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path

from .agent_latency import OurAgent, measure
from .report import report

REPO = Path(__file__).resolve().parent.parent
BUDGET_MIB = 45.0


def image_venv(directory: Path, extras: str) -> Path:
    """A virtualenv holding the wheel and its runtime dependencies only; its python."""
    wheels = directory / "wheels"
    venv = directory / "venv"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels),
         str(REPO)],
        check=True,
    )  # fmt: skip
    wheel = next(wheels.glob("karmada_pull_agent-*.whl"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    requirement = f"{wheel}[{extras}]" if extras else str(wheel)
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "--quiet", "--only-binary=:all:", requirement],
        check=True,
    )  # fmt: skip
    return venv / "bin" / "python"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extras", default="", help="the wheel's extras, as EXTRAS in the image")
    parser.add_argument("--works", type=int, default=20)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--budget-mib", type=float, default=BUDGET_MIB)
    parser.add_argument("--out", default="bench/results/image_footprint.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="image-footprint-") as tmp:
        python = image_venv(Path(tmp), args.extras)
        result = asyncio.run(
            measure(OurAgent([], python=str(python)), args.works, idle_seconds=args.idle_seconds)
        )
    idle = float(result["agent_rss_idle_mib"])
    summary = {
        "extras": args.extras or "(none: the default image)",
        "agent_rss_idle_mib": idle,
        "agent_rss_after_load_mib": result["agent_rss_after_load_mib"],
        "budget_idle_mib": args.budget_mib,
        "within_budget": idle <= args.budget_mib,
        "works": args.works,
        "works_per_second": result["works_per_second"],
        "machine": result["machine"],
    }
    report(summary, args.out)
    return 0 if idle <= args.budget_mib else 1


if __name__ == "__main__":
    raise SystemExit(main())
