"""The CLI prints user errors as one line with exit status 2 and validates config files."""
from __future__ import annotations

import subprocess
import sys

from app.cli.main import main


def test_config_show_and_check(tmp_path, capsys):
    assert main(["config", "show"]) == 0
    shown = capsys.readouterr().out
    assert "[controller]" in shown and "listen_port = 6653" in shown
    good = tmp_path / "good.toml"
    good.write_text(shown)
    assert main(["config", "check", str(good)]) == 0


def test_bad_config_is_one_line_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[monitor]\nbogus = 1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "config", "check", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "unknown key [monitor] bogus" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_help_lists_subcommands():
    proc = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "--help"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0
    assert "config" in proc.stdout and "pce" in proc.stdout


def test_lab_circuit_without_discover_is_refused(capsys, monkeypatch):
    """Issue 14 item 8: `mlte lab testbed --circuit initial` ignored --circuit silently. Refused
    before the root check (which a non-root uid stops here, so no lab can start from this test)."""
    import os

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert main(["lab", "testbed", "--circuit", "initial"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mlte: error: --circuit") and "--discover --circuit initial" in err


def test_unknown_flag_shows_the_subcommands_usage(capsys):
    """Issue 14 item 8: an unknown flag printed the top-level usage, not the subcommand's."""
    import pytest

    with pytest.raises(SystemExit) as exc:
        main(["pce", "path", "--graph", "fig2", "--src", "A", "--dst", "C", "--bandwidth", "1", "--bogus"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith("usage: mlte pce path ")
    assert "mlte pce path: error: unrecognized arguments: --bogus" in err
    with pytest.raises(SystemExit):
        main(["web", "user", "list", "--nope"])
    assert "mlte web user list: error: unrecognized arguments: --nope" in capsys.readouterr().err


def test_lab_run_options_a_lab_does_not_take_are_refused(capsys, monkeypatch):
    """`mlte lab run NAME --runs/--seed/--te/--demo`: only labs whose run() takes them; a one-line
    error before any network is built (root and OVS faked: the check comes first)."""
    import os
    import shutil

    import pytest

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/" + name)
    assert main(["lab", "run", "planned-vs-oneshot", "--runs", "3"]) == 2
    assert "lab planned-vs-oneshot does not take --runs" in capsys.readouterr().err
    assert main(["lab", "run", "elastic-offload", "--demo", "--te", "off"]) == 2
    assert "--demo" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["lab", "run", "elastic-offload", "--runs", "0"])
    assert "must be >= 1" in capsys.readouterr().err


def test_unknown_top_level_option_and_version(capsys):
    """Issue 26 item 4: `mlte --bogus` said "required: COMMAND"; there was no `mlte --version`."""
    from importlib.metadata import version

    import pytest

    for argv, needle in ((["--bogus"], "mlte: error: unknown option --bogus"),
                         (["pce", "--bogus"], "mlte pce: error: unknown option --bogus"),
                         ([], "mlte: error: the following arguments are required: COMMAND"),
                         (["web", "user"], "mlte web user: error: the following arguments are required")):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2 and needle in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"mlte {version('mlte')}"


def test_config_that_is_a_directory_is_one_line(tmp_path, capsys):
    """Issue 26 item 1: `mlte -c /some/dir ...` raised IsADirectoryError."""
    assert main(["-c", str(tmp_path), "pce", "path", "--graph", "fig2", "--src", "A", "--dst", "C",
                 "--bandwidth", "1"]) == 2
    err = capsys.readouterr().err
    assert err == f"mlte: error: config file {tmp_path} is a directory; give a TOML file (see `mlte config show`)\n"


def test_config_check_refuses_pce_values_the_runtime_refuses(tmp_path, capsys):
    """Issue 26 item 3: `mlte config check` said OK to k_paths = -3 and solver = "gurobi"."""
    for text, needle in (("[pce]\nk_paths = -3\n", "[pce] k_paths must be >= 1"),
                         ('[pce]\nsolver = "gurobi"\n', "[pce] solver must be one of highs, cbc")):
        f = tmp_path / "c.toml"
        f.write_text(text)
        assert main(["config", "check", str(f)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and needle in err and err.count("\n") == 1


def test_read_only_commands_refuse_a_missing_database(tmp_path, capsys, monkeypatch):
    """Issue 26 item 2: `mlte web user list --db "not a url::"` printed "no users yet" and created the file."""
    monkeypatch.chdir(tmp_path)
    for argv in (["web", "user", "list", "--db", "not a url::"],
                 ["web", "user", "remove", "bob", "--db", "typo.db"],
                 ["web", "user", "revoke-token", "bob", "--all", "--db", "typo.db"],
                 ["plans", "--db", "missing.db"]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and "no such database file" in err, (argv, err)
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[db]\nurl = "sqlite:///{tmp_path / "gone.db"}"\n')
    assert main(["-c", str(cfg), "monitor", "events"]) == 2
    assert "[db] url" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml"]


def test_ctrl_d_at_the_password_prompt_is_one_line(tmp_path, capsys, monkeypatch):
    """Issue 26 item 1: Ctrl-D at `mlte web user create NAME`'s prompt raised EOFError."""
    import getpass

    def eof(prompt: str = "") -> str:
        raise EOFError

    monkeypatch.setattr(getpass, "getpass", eof)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    db = tmp_path / "u.db"
    assert main(["web", "user", "create", "cy", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err == "mlte: error: no password entered (end of input at the prompt); nothing changed\n"
