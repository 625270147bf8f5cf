"""``mlte web user ...``: users that can log in as the README says, tokens shown once and stored
hashed, and every refusal one line with exit status 2."""
from __future__ import annotations

import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from app.cli.main import main

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "users.db")


def run(capsys: pytest.CaptureFixture[str], *argv: str, stdin: str | None = None,
        monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[int, str, str]:
    if stdin is not None:
        assert monkeypatch is not None
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def fails(capsys: pytest.CaptureFixture[str], *argv: str, needle: str) -> None:
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == "", (out, err)
    assert err.count("\n") == 1 and err.startswith("mlte: error: ") and needle in err, err


def login(db: str, name: str, password: str) -> int:
    """Log in through the UI's form with Flask's test client; the response status (302 = logged in)."""
    from app.web import create_app

    app = create_app({"DATABASE": db, "SECRET_KEY": "t", "TOPOLOGY": "fig2"})
    try:
        c = app.test_client()
        page = c.get("/login").get_data(as_text=True)
        token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page).group(1)
        return c.post("/login", data={"username": name, "password": password, "csrf_token": token}).status_code
    finally:
        app.extensions["mlte"].db.dispose()


def api_me(db: str, token: str) -> int:
    from app.web import create_app

    app = create_app({"DATABASE": db, "SECRET_KEY": "t", "TOPOLOGY": "fig2"})
    try:
        return app.test_client().get("/api/v1/me", headers={"Authorization": f"Bearer {token}"}).status_code
    finally:
        app.extensions["mlte"].db.dispose()


def test_readme_commands_log_in(tmp_path: Path) -> None:
    """The README's user line, run as written (in a fresh directory: its default database), then the login."""
    readme = (ROOT / "README.md").read_text()
    line = next(ln for ln in readme.splitlines() if "web user create ada" in ln)
    cmd = line.split("#", 1)[0].strip().replace(".venv/bin/mlte", f"{shlex.quote(sys.executable)} -m app.cli.main")
    proc = subprocess.run(cmd, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    password = re.search(r"printf '([^'\\]+)", line).group(1)
    assert login(str(tmp_path / "mlte.db"), "ada", password) == 302
    assert login(str(tmp_path / "mlte.db"), "ada", "wrong") == 401


def test_create_with_password_stdin_then_login_and_token(db, capsys, monkeypatch) -> None:  # noqa: ANN001
    rc, out, err = run(capsys, "web", "user", "create", "ada", "--admin", "--password-stdin", "--db", db,
                       stdin="s3cret pw\n", monkeypatch=monkeypatch)
    assert rc == 0
    token = out.strip()
    assert out.count("\n") == 1 and token.startswith("mlte_")  # stdout is the token alone: TOKEN=$(...)
    assert "shown only this once" in err and "Authorization: Bearer <token>" in err
    assert "can log in to the web UI" in err
    assert login(db, "ada", "s3cret pw") == 302 and api_me(db, token) == 200


def test_create_without_password_says_tokens_only(db, capsys, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # not a terminal: no prompt
    rc, out, err = run(capsys, "web", "create-user", "bot", "--db", db)  # the old name still works
    assert rc == 0 and out.strip().startswith("mlte_")
    assert "can only use API tokens" in err and "mlte web user set-password bot" in err
    assert login(db, "bot", "") in (400, 401)


def test_prompt_on_a_terminal_asks_twice(db, capsys, monkeypatch) -> None:  # noqa: ANN001
    import getpass

    answers = iter(["pw-one", "pw-one", "a", "b"])
    monkeypatch.setattr(getpass, "getpass", lambda prompt="": next(answers))
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    assert run(capsys, "web", "user", "create", "cy", "--db", db)[0] == 0
    assert login(db, "cy", "pw-one") == 302
    fails(capsys, "web", "user", "set-password", "cy", "--db", db, needle="the passwords differ")
    assert login(db, "cy", "pw-one") == 302  # unchanged


def test_set_password_list_tokens_remove(db, tmp_path, capsys, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    run(capsys, "web", "user", "create", "ada", "--admin", "--db", db)
    first = run(capsys, "web", "user", "create", "bob", "--db", db)[1].strip()
    pw = tmp_path / "pw.txt"
    pw.write_text("bob-pw\nignored second line\n")
    assert run(capsys, "web", "user", "set-password", "bob", "--password-file", str(pw), "--db", db)[0] == 0
    assert login(db, "bob", "bob-pw") == 302

    rc, out, err = run(capsys, "web", "user", "new-token", "bob", "--label", "ci", "--db", db)
    ci = out.strip()
    assert rc == 0 and ci.startswith("mlte_") and "shown only this once" in err and api_me(db, ci) == 200
    fails(capsys, "web", "user", "new-token", "bob", "--label", "ci", "--db", db, needle="already has a token")

    rc, out, _ = run(capsys, "web", "user", "list", "--db", db)
    rows = [ln.split() for ln in out.strip().splitlines()]
    assert rows[0] == ["NAME", "ADMIN", "PASSWORD", "TOKENS", "CREATED"]
    assert rows[1][:4] == ["ada", "yes", "no", "1"] and rows[2][:4] == ["bob", "no", "yes", "2"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", rows[1][4])

    assert run(capsys, "web", "user", "revoke-token", "bob", "ci", "--db", db)[0] == 0
    assert api_me(db, ci) == 401 and api_me(db, first) == 200
    fails(capsys, "web", "user", "revoke-token", "bob", "ci", "--db", db, needle="no token labelled 'ci'")
    assert run(capsys, "web", "user", "revoke-token", "bob", "--all", "--db", db)[0] == 0
    assert api_me(db, first) == 401

    fails(capsys, "web", "user", "remove", "ada", "--db", db, needle="last admin")
    assert run(capsys, "web", "user", "remove", "bob", "--db", db)[0] == 0
    fails(capsys, "web", "user", "remove", "bob", "--db", db, needle="no user 'bob' (users: ada)")
    assert run(capsys, "web", "user", "remove", "ada", "--force", "--db", db)[0] == 0
    assert "no users yet" in run(capsys, "web", "user", "list", "--db", db)[2]


def test_tokens_are_stored_hashed(db, capsys, monkeypatch) -> None:  # noqa: ANN001
    from app.db.engine import Database
    from app.db.models import ApiToken
    from app.web.auth import hash_token

    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    token = run(capsys, "web", "user", "create", "eve", "--db", db)[1].strip()
    second = run(capsys, "web", "user", "new-token", "eve", "--db", db)[1].strip()
    d = Database(db)
    try:
        with d.session() as s:
            stored = set(s.execute(select(ApiToken.token_hash)).scalars())
    finally:
        d.dispose()
    assert stored == {hash_token(token), hash_token(second)}


def test_refusals_are_one_line(db, tmp_path, capsys, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    run(capsys, "web", "user", "create", "ada", "--admin", "--db", db)
    fails(capsys, "web", "user", "create", "ada", "--db", db, needle="exists already")
    fails(capsys, "web", "user", "set-password", "nobody", "--db", db, needle="no user 'nobody'")
    fails(capsys, "web", "user", "set-password", "ada", "--db", db, needle="no password given")
    fails(capsys, "web", "user", "set-password", "ada", "--password-file", str(tmp_path / "nope"), "--db", db,
          needle="--password-file")
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n"))
    fails(capsys, "web", "user", "set-password", "ada", "--password-stdin", "--db", db, needle="password is empty")
    fails(capsys, "web", "user", "list", "--db", "foo://x", needle="unknown database driver")
    fails(capsys, "web", "user", "list", "--db", str(tmp_path / "no" / "x.db"), needle="no such database file")


def test_owner_of_reservations_is_not_removed(db, capsys, monkeypatch) -> None:  # noqa: ANN001
    from app.web import create_app

    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    token = run(capsys, "web", "user", "create", "kim", "--db", db)[1].strip()
    app = create_app({"DATABASE": db, "SECRET_KEY": "t", "TOPOLOGY": "fig2"})
    try:
        r = app.test_client().post("/api/v1/reservations", headers={"Authorization": f"Bearer {token}"}, json={
            "name": "r", "src": "A:1", "dst": "C:3", "bandwidth": 1, "end": "2099-01-01T00:00:00Z",
            "start": "2098-12-31T00:00:00Z"})
        assert r.status_code == 201, r.get_json()
    finally:
        app.extensions["mlte"].db.dispose()
    fails(capsys, "web", "user", "remove", "kim", "--db", db, needle="owns 1 reservation(s)")
