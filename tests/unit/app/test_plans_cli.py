"""``mlte plans``: the recorded update plans with per-step times, from the database."""
from __future__ import annotations

from app.cli.main import main
from app.db.migrate import open_migrated
from app.db.provisioning import ProvisioningStore

T = 1_900_000_000.0


def test_plans_lists_a_recorded_plan_with_its_steps(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    store = ProvisioningStore(open_migrated(url))
    steps = [{"id": "xcon+X:1-3", "kind": "xcon_add", "target": "X:1<->3", "deps": [], "started_at": T,
              "finished_at": T + 0.2, "ok": True, "error": ""},
             {"id": "circuit-up", "kind": "circuit_up", "target": "ports A:3,C:1", "deps": ["xcon+X:1-3"],
              "started_at": T + 0.2, "finished_at": T + 0.25, "ok": False, "error": "ports A:3 not up within 5s"}]
    store.record_plan({"kind": "provision", "mode": "ordered", "state": "rolled_back", "error": "circuit-up failed",
                       "started_at": T, "finished_at": T + 0.3, "steps": steps})
    store.db.dispose()
    assert main(["plans", "--db", url]) == 0
    out = capsys.readouterr().out
    assert "provision (ordered): rolled_back in 300 ms: circuit-up failed" in out
    assert "+  200.0 ms" in out and "FAILED" in out and "ports A:3 not up within 5s" in out
    assert main(["plans", "--db", url, "--json"]) == 0
    assert '"circuit_up"' in capsys.readouterr().out


def test_plans_errors_are_one_line(tmp_path, capsys):
    assert main(["plans", "--db", str(tmp_path / "no" / "such" / "dir.db")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "database" in err[0]
    empty = f"sqlite:///{tmp_path / 'e.db'}"
    open_migrated(empty).dispose()
    assert main(["plans", "--db", empty]) == 0
    assert "no plans recorded" in capsys.readouterr().out


def test_plans_refuses_a_database_that_does_not_exist(tmp_path, capsys, monkeypatch):
    """Reading must not create an empty database: a mistyped --db is one line, nothing written."""
    monkeypatch.chdir(tmp_path)
    for db in ("missing.db", f"sqlite:///{tmp_path / 'missing2.db'}"):
        assert main(["plans", "--db", db]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "no such database file" in err and f"--db {db}" in err
    assert list(tmp_path.iterdir()) == []
