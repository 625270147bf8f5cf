"""``mlte pce te`` and ``mlte pce topologies`` through the real command-line entry point."""
from __future__ import annotations

import json

import pytest

from app.cli.main import main


def test_te_writes_json_with_allocations_and_links(tmp_path, capsys) -> None:
    out = tmp_path / "geant.json"
    rc = main(["pce", "te", "--topology", "sndlib/geant", "--capacity", "100000", "--objective", "mlu",
               "--formulation", "edge", "--json", str(out)])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["topology"] == "sndlib/geant" and doc["formulation"] == "edge"
    assert doc["objective"]["name"] == "mlu"
    assert doc["objective"]["value"] == pytest.approx(max(link["utilization"] for link in doc["links"]))
    assert len(doc["allocations"]) == doc["demands"]["count"] == 462
    assert len(doc["links"]) == 72  # 36 links, both directions
    assert all(a["allocated"] == pytest.approx(a["demand"]) for a in doc["allocations"])
    for key in ("build_s", "solve_s", "total_s", "end_to_end_s"):
        assert doc["timings"][key] >= 0
    assert doc["sizes"]["variables"] > 0 and doc["sizes"]["nonzeros"] > 0
    captured = capsys.readouterr()
    assert "mlu =" in captured.out and "LP:" in captured.err


def test_te_path_partitions_and_demand_scale(tmp_path) -> None:
    out = tmp_path / "abilene.json"
    rc = main(["pce", "te", "--topology", "topozoo/Abilene", "--capacity", "1000", "--load", "0.8",
               "--demand-scale", "2", "--paths", "3", "--partitions", "2", "--split", "0.5", "--json", str(out),
               "--summary-only", "-q"])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["partitions"] == 2 and doc["paths"] == 3 and doc["split"] == 0.5 and "allocations" not in doc
    assert doc["objective"]["name"] == "total-flow"
    assert 0 < doc["demands"]["allocated"] <= doc["demands"]["total"] + 1e-6
    assert doc["sizes"]["largest_partition"]["variables"] < doc["sizes"]["variables"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--topology", "sndlib/geamt", "--capacity", "1"], "did you mean sndlib/geant"),
        (["--topology", "sndlib/geant"], "--capacity"),
        (["--topology", "sndlib/geant", "--capacity", "-10"], "positive"),
        (["--topology", "sndlib/geant", "--capacity", "10", "--paths", "0"], "at least 1"),
        (["--topology", "sndlib/geant", "--capacity", "10", "--demand-scale", "-1"], "demand-scale"),
        (["--topology", "topozoo/Abilene", "--capacity", "10", "--demands", "sndlib"], "no demand matrix"),
    ],
)
def test_te_user_errors_exit_2_with_one_line(argv, message, capsys) -> None:
    assert main(["pce", "te", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_topologies_lists_a_source(capsys) -> None:
    assert main(["pce", "topologies", "--source", "sndlib"]) == 0
    names = capsys.readouterr().out.split()
    assert "sndlib/geant" in names and len(names) == 26
    assert main(["pce", "topologies", "--source", "caida", "--details"]) == 0
    assert "caida/2024-08/7018\t594 nodes\t1674 links" in capsys.readouterr().out
