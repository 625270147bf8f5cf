"""WAN lab size series (issue 25): discovery time, controller CPU share and RSS, monitor OpenFlow bytes
per Ts against the number of PoPs, idle and loaded (lit backbone, traffic, reservations starting
together: ``mininet_labs.wan_load``), with the log-log exponent fitted per measure.

Each size runs ``mininet_labs.wan.run`` (its own lab, under the machine-wide network lock). ``--quick``:
abilene only; default: abilene, sndlib/geant, gabriel/25, germany50; ``--sizes`` to choose. The issue's
targets (germany50 CPU <= 25 % of a core at Ts = 1 s) are recorded, not asserted.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DEFAULT_SIZES = ("sndlib/abilene", "sndlib/geant", "gabriel/25/0", "sndlib/germany50")
MEASURES = ("discovery_s", "controller_discovery_s", "cpu_share", "loaded_cpu_share", "rss_mb",
            "reservations_active_s")


def exponent(xs: list[float], ys: list[float]) -> float | None:
    """Least-squares slope of log y on log x (None with fewer than two positive points)."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    den = sum((p[0] - mx) ** 2 for p in pts)
    return None if den == 0 else round(sum((p[0] - mx) * (p[1] - my) for p in pts) / den, 3)


def plot(rows: list[dict], fits: dict[str, float | None], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, (len(MEASURES) + 1) // 2, figsize=(4 * ((len(MEASURES) + 1) // 2), 6.4))
    for ax, key in zip(axes.flat, MEASURES, strict=False):
        pts = [(r["pops"], r[key]) for r in rows if r.get(key)]
        ax.loglog([p[0] for p in pts], [p[1] for p in pts], "o-")
        ax.set_xlabel("PoPs")
        ax.set_title(f"{key} (exponent {fits.get(key)})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sizes", nargs="+", help=f"topohub keys (default: {', '.join(DEFAULT_SIZES)})")
    ap.add_argument("--plot", help="PNG of the cost growth (default: next to the JSON)")
    ap.add_argument("--reservations", type=int, default=100,
                    help="reservations that start together in each size's loaded stage (default 100)")
    ap.add_argument("--full", action="store_true",
                    help="each size as `mlte lab run wan` without --quick: a 60-s loaded window with reservations "
                         "arriving (the germany50 target's measurement) instead of 10 s")
    a = ap.parse_args()
    from mininet_labs.wan import run

    sizes = a.sizes or (DEFAULT_SIZES[:1] if a.quick else DEFAULT_SIZES)
    rows = []
    for key in sizes:
        with tempfile.TemporaryDirectory(prefix="wan-scale-") as tmp:
            try:
                res = run(Path(tmp), quick=not a.full, topology=f"topohub:{key}", reservations=a.reservations)
            except Exception as exc:  # one size failing must not lose the others
                print(f"{key}: failed: {exc}", flush=True)
                rows.append({"topology": key, "error": str(exc)})
                continue
        loaded = res.get("loaded") or {}
        row = {k: res.get(k) for k in ("topology", "pops", "fibres", "uplinks", "connected_s", "phases",
                                       "discovery_s", "controller_discovery_s", "cpu_share", "rss_mb")}
        row["monitor_per_ts"] = res["monitor_cost"]["per_ts"]
        row["loaded_cpu_share"] = loaded.get("cpu_share")
        row["reservations_active_s"] = (loaded.get("reservations") or {}).get("active_s")
        row["loaded"] = {k: loaded.get(k) for k in ("backbone", "reservations", "rss_mb", "arrivals", "traffic")}
        row["graph_problems"] = res.get("graph_problems")
        row["rediscovery"] = res.get("rediscovery")
        row["elephant"] = res.get("elephant")
        row["loaded_monitor_per_ts"] = (loaded.get("monitor_cost") or {}).get("per_ts")
        rows.append(row)
        print(json.dumps(row), flush=True)
    ok = [r for r in rows if "error" not in r]
    fits = {key: exponent([r["pops"] for r in ok], [r[key] for r in ok]) for key in MEASURES}
    out = {"bench": "wan_scale", "quick": a.quick, "full": a.full, "command": " ".join(sys.argv), "rows": rows,
           "exponents": fits}
    Path(a.json).write_text(json.dumps(out, indent=2))
    if len(ok) >= 2:
        plot(ok, fits, Path(a.plot) if a.plot else Path(a.json).with_suffix(".png"))
    print(json.dumps(fits))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
