"""How the optical scan's work grows with the network: coded rounds against one probe at a time.

Plain planning only (no OVS, no root): for each lab topology, the probes the one-probe scan needs
(:func:`app.controller.scan_rounds.one_probe_count`, the baseline) and the rounds and probe XCONs of
the coded scan (:func:`app.controller.scan_rounds.plan_rounds`), with the fibres known from the
vendor file (what ``mlte lab ... --discover`` does) and without (``--no-static``). A round costs
about what one probe costs (one provisioning delay + ``scan_settle`` + the teardown), so the
rounds / probes ratio is the expected speed-up; docs/performance/scale.md has the lab timings.

    .venv/bin/python bench/ctl_scan_plan.py --json bench/results/ctl_scan_plan.json --png docs/img/scan_rounds.png
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.controller.scan_rounds import one_probe_count, plan_rounds, port_groups  # noqa: E402
from topology.spec import LabSpec, optical_mesh, spec_by_name  # noqa: E402

TOPOHUB = ["sndlib/abilene", "sndlib/geant", "sndlib/germany50"]
MESH_SIZES = [10, 20, 50, 100, 200]


def plan_counts(spec: LabSpec, fibres_known: bool) -> dict:
    """One-probe probes, coded rounds and coded probes for ``spec``."""
    dpid = {o.name: o.dpid for o in spec.ots}
    ports = {o.dpid: dict(o.ports) for o in spec.ots}
    known: dict[tuple[int, int], None] = {}
    if fibres_known:
        for link in spec.links_of_kind("optical"):
            known[(dpid[link.a], link.a_port)] = None
            known[(dpid[link.b], link.b_port)] = None
    groups = port_groups(ports, {}, known)
    t0 = time.perf_counter()
    plan = plan_rounds(groups)
    plan_s = time.perf_counter() - t0
    unknown = sum(len(g.unknown) for g in groups)
    return {"topology": spec.name, "ots": len(spec.ots), "fibres_known": fibres_known, "unknown_ports": unknown,
            "one_probe_probes": one_probe_count(groups), "coded_rounds": len(plan.rounds),
            "coded_probes": sum(len(r) for r in plan.rounds), "max_probes_per_round": max(map(len, plan.rounds)),
            "plan_seconds": round(plan_s, 4)}


def draw(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for known, style in ((True, "-"), (False, "--")):
        mesh = sorted((r for r in rows if r["topology"].startswith("mesh") and r["fibres_known"] == known),
                      key=lambda r: r["ots"])
        tag = "fibres known" if known else "no vendor file"
        ax.plot([r["ots"] for r in mesh], [r["one_probe_probes"] for r in mesh], "o" + style, color="tab:red",
                label=f"one probe at a time: probes ({tag})")
        ax.plot([r["ots"] for r in mesh], [r["coded_rounds"] for r in mesh], "s" + style, color="tab:blue",
                label=f"coded: rounds ({tag})")
    for r in rows:
        if not r["topology"].startswith("mesh") and r["fibres_known"]:
            ax.annotate(r["topology"].replace("topohub-sndlib-", ""), (r["ots"], r["coded_rounds"]),
                        textcoords="offset points", xytext=(0, 8), fontsize=8, ha="center")
            ax.plot([r["ots"]], [r["coded_rounds"]], "k^")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("OTS nodes (one packet switch each, 2 uplinks)")
    ax.set_ylabel("sequential steps (≈ 0.5–1 s each)")
    ax.set_title("Optical scan: probes one at a time vs coded rounds")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--png", type=Path)
    ap.add_argument("--quick", action="store_true", help="abilene and two mesh sizes only")
    args = ap.parse_args(argv)
    specs = [spec_by_name(f"topohub:{k}") for k in (TOPOHUB[:1] if args.quick else TOPOHUB)]
    specs += [optical_mesh(n, n, degree=3, seed=1) for n in (MESH_SIZES[:2] if args.quick else MESH_SIZES)]
    rows = [plan_counts(s, known) for s in specs for known in (True, False)]
    for r in rows:
        print(f"{r['topology']:28s} fibres_known={r['fibres_known']!s:5s} unknown={r['unknown_ports']:4d} "
              f"one-probe={r['one_probe_probes']:4d} coded rounds={r['coded_rounds']:3d} "
              f"probes={r['coded_probes']:4d} (max {r['max_probes_per_round']}/round)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"machine": platform.node(), "python": platform.python_version(),
                                     "baseline": "one_probe_probes", "rows": rows}, indent=2))
    if args.png:
        draw(rows, args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
