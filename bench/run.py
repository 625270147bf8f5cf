"""Run a group of benchmarks: every ``bench/<group>_*.py`` with ``--json bench/results/<name>.json``.

Each benchmark script accepts ``--json PATH`` (and ``--quick`` for a short smoke run), measures
its own baseline in the same run and writes ratios into its JSON. Exit status is non-zero if any
script failed. ``bench/results/`` holds the recorded runs the docs cite, so a ``--quick`` smoke
run writes to ``bench/results/quick/`` instead of replacing them.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: bench/run.py GROUP [--quick]   (GROUP: pce, monitor, rest, ots, ctl, delay, ha, wan, te)", file=sys.stderr)
        return 2
    group, extra = argv[0], argv[1:]
    scripts = sorted(HERE.glob(f"{group}_*.py"))
    if not scripts:
        print(f"no benchmarks bench/{group}_*.py", file=sys.stderr)
        return 2
    out = HERE / "results" / ("quick" if "--quick" in extra else "")
    out.mkdir(parents=True, exist_ok=True)
    failed = []
    for script in scripts:
        target = out / f"{script.stem}.json"
        print(f"== {script.name} -> {target}", flush=True)
        t0 = time.monotonic()
        rc = subprocess.call([sys.executable, str(script), "--json", str(target), *extra])
        print(f"== {script.name}: exit {rc} in {time.monotonic() - t0:.1f}s", flush=True)
        if rc:
            failed.append(script.name)
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
