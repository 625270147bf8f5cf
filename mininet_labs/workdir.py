"""The output folder every Fig. 2 lab starts from: ``out`` (absolute), ``out/work`` with the lab's
helper scripts, and the static optical file (fibres + adaptations, so admission and the PCE can route
before any scan) for the OTS agents' provisioning delay."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIG2_DELAY = (0.150, 0.220)  # the OTS agents' provisioning delay range (s), as the paper's Fig. 7


@dataclass(frozen=True)
class LabDirs:
    out: Path
    work: Path
    spec: Any  # topology.spec.LabSpec
    static: Path
    delay: tuple[float, float]


def fig2_dirs(out: Path | str, scripts: dict[str, str] | None = None,
              delay: tuple[float, float] = FIG2_DELAY) -> LabDirs:
    """Create ``out`` and ``out/work``, write ``scripts`` (file name -> text) into ``work`` and the
    static optical file of the Fig. 2 testbed into ``out``."""
    from topology.spec import fig2_testbed, spec_to_vendor_file
    from topology.vendor_file import write_vendor_file

    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    work.mkdir(exist_ok=True)
    for name, text in (scripts or {}).items():
        (work / name).write_text(text)
    spec = fig2_testbed()
    static = out / "fig2-optical.json"
    write_vendor_file(spec_to_vendor_file(spec, setup_time=sum(delay) / 2), static)
    return LabDirs(out, work, spec, static, delay)


def finish(procs: list[Any], timeout: float) -> list[tuple[str, str]]:
    """(stdout, stderr) of each host process once it ended; one still running ``timeout`` s after the
    first wait began is killed, so a lab never leaves a sender or receiver behind."""
    import subprocess
    import time

    until = time.monotonic() + timeout
    outs: list[tuple[str, str]] = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(until - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        outs.append((out or "", err or ""))
    return outs


def fig2_topos(name: str) -> dict[str, Any]:
    """``topos`` for a lab file run as ``sudo mn --custom mininet_labs/FILE.py --topo NAME``: the Fig. 2
    testbed the lab runs on (``NAME,unit_mbps=2`` scales it). Importing the testbed also puts the
    project's .venv on ``sys.path`` (Debian's ``mn`` runs /usr/bin/python3). Empty without Mininet."""
    try:
        from mininet_labs.testbed import MlteTopo
    except ImportError:  # pragma: no cover - no Mininet here: the lab's plain parts still import
        return {}
    return {name: MlteTopo}
