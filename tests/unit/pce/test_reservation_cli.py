"""``mlte pce path`` and ``mlte pce circuits`` end to end through the CLI entry point."""
from __future__ import annotations

import json

from app.cli.main import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_path_json_on_fig2(capsys):
    rc, out, _ = run(capsys, "pce", "path", "--graph", "fig2", "--src", "h1", "--dst", "h3",
                     "--bandwidth", "5", "--start", "2026-01-01T00:00", "--end", "2026-01-01T01:00", "--json")
    assert rc == 0
    (path,) = json.loads(out)
    assert path["nodes"][0] == "h1" and path["nodes"][-1] == "h3" and path["available"] == 10


def test_disjoint_and_k(capsys):
    rc, out, _ = run(capsys, "pce", "path", "--graph", "fig2", "--src", "A", "--dst", "C", "--bandwidth", "5",
                     "--k", "2", "--disjoint", "--json")
    a, b = json.loads(out)
    assert rc == 0 and not set(a["edges"]) & set(b["edges"])
    rc, out, _ = run(capsys, "pce", "path", "--graph", "fig2", "--src", "A", "--dst", "C", "--bandwidth", "5",
                     "--k", "3")
    assert rc == 0 and out.count("path ") == 3


def test_no_path_is_a_one_line_error(capsys):
    rc, _, err = run(capsys, "pce", "path", "--graph", "fig2", "--src", "A", "--dst", "C", "--bandwidth", "15")
    assert rc == 2 and "granularity" in err and "Traceback" not in err
    rc, _, err = run(capsys, "pce", "path", "--graph", "fig2", "--src", "A", "--dst", "Q", "--bandwidth", "1")
    assert rc == 2 and "unknown dst" in err
    rc, _, err = run(capsys, "pce", "path", "--graph", "/nonexistent.json", "--src", "A", "--dst", "C",
                     "--bandwidth", "1")
    assert rc == 2 and "not found" in err


def test_graph_file_and_bookings(capsys, tmp_path):
    from topology.spec import fig2_testbed, spec_to_graph

    gfile = tmp_path / "g.json"
    gfile.write_text(spec_to_graph(fig2_testbed()).to_json())
    books = tmp_path / "b.json"
    books.write_text(json.dumps([{"id": "r1", "start": 0, "end": 1e12, "bandwidth": 1,
                                  "edges": [], "oports": ["X:1", "X:4"]}]))
    rc, _, err = run(capsys, "pce", "path", "--graph", str(gfile), "--src", "A", "--dst", "C",
                     "--bandwidth", "1", "--bookings", str(books))
    assert rc == 2 and "booked whole by r1" in err


def test_circuits_cli(capsys, tmp_path):
    dem = tmp_path / "d.json"
    dem.write_text(json.dumps([{"id": "d1", "src": "h1", "dst": "h3", "bandwidth": 8},
                               {"id": "d2", "src": "A", "dst": "C", "bandwidth": 5, "deadline": 1}]))
    for flag in ("--integer", "--relax"):
        rc, out, _ = run(capsys, "pce", "circuits", "--graph", "fig2", "--demands", str(dem), flag, "--json")
        plan = json.loads(out)
        assert rc == 0 and plan["served"] == {"d1": 8.0, "d2": 5.0} and len(plan["lit"]) == 2


def test_k_below_one_is_refused(capsys):
    for k in ("0", "-3"):
        rc, out, err = run(capsys, "pce", "path", "--graph", "fig2", "--src", "A", "--dst", "C",
                           "--bandwidth", "5", "--k", k)
        assert rc == 2 and out == "" and f"--k must be >= 1 (paths to compute), got {k}" in err


def test_demands_file_that_is_a_directory_or_an_object(capsys, tmp_path):
    """One line naming the file, not IsADirectoryError or "string indices must be integers"."""
    rc, _, err = run(capsys, "pce", "circuits", "--graph", "fig2", "--demands", str(tmp_path))
    assert rc == 2 and f"demands file {tmp_path} is a directory" in err and err.count("\n") == 1
    dem = tmp_path / "d.json"
    dem.write_text(json.dumps({"id": "d1", "src": "h1", "dst": "h3", "bandwidth": 8}))
    rc, _, err = run(capsys, "pce", "circuits", "--graph", "fig2", "--demands", str(dem))
    assert rc == 2 and "demands must be a JSON list of objects" in err and "got dict" in err
    dem.write_text(json.dumps([1, 2]))
    rc, _, err = run(capsys, "pce", "circuits", "--graph", "fig2", "--demands", str(dem))
    assert rc == 2 and "a list of non-objects" in err
