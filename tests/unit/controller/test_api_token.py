"""The control API's credential (issue 24 item 5): the token file, the bearer check, the client's errors.

The last tests start a real ``mlte controller`` process (no switch, no OVS) and talk to it over HTTP.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from app.cli.main import main
from app.controller import api_token
from app.controller.api_token import BearerCheck, TokenFileError, TokenPath
from app.controller.client import ControlApiError, ControllerClient, CredentialError, wait_until
from tests.unit.controller.test_control_api import api, call  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parents[3]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# ---- the token file -----------------------------------------------------------------------------
def test_made_0600_in_a_0700_directory_and_reused(tmp_path):
    where = TokenPath(tmp_path / "new" / "dir" / "api-token", "test")
    token = api_token.load_or_create(where)
    assert len(token) >= 32 and where.path.read_text().strip() == token
    assert mode(where.path) == 0o600 and mode(where.path.parent) == 0o700
    assert api_token.load_or_create(where) == token  # a restart keeps the token: clients keep working
    assert sorted(p.name for p in where.path.parent.iterdir()) == ["api-token"]  # no temporary file left
    assert api_token.load_or_create(TokenPath(tmp_path / "other", "test")) != token


def test_never_readable_by_others_even_with_umask_0(tmp_path):
    """Created with its mode (not chmod-ed afterwards): a umask of 0 still gives 0600."""
    old = os.umask(0)
    try:
        where = TokenPath(tmp_path / "api-token", "test")
        api_token.load_or_create(where)
    finally:
        os.umask(old)
    assert mode(where.path) == 0o600


@pytest.mark.parametrize("bits", [0o640, 0o604, 0o660, 0o644])
def test_a_file_others_can_read_is_refused(tmp_path, bits):
    path = tmp_path / "api-token"
    path.write_text("x" * 40 + "\n")
    path.chmod(bits)
    with pytest.raises(TokenFileError) as err:
        api_token.load_or_create(TokenPath(path, api_token.KEY))
    msg = str(err.value)
    assert "\n" not in msg and str(path) in msg and f"{bits:04o}" in msg and "chmod 600" in msg
    assert api_token.KEY in msg
    assert path.read_text() == "x" * 40 + "\n"  # left as it was


def test_a_symlink_and_garbage_are_refused(tmp_path):
    real = tmp_path / "real"
    real.write_text("y" * 40)
    real.chmod(0o600)
    link = tmp_path / "api-token"
    link.symlink_to(real)
    with pytest.raises(TokenFileError, match="symbolic link"):
        api_token.load_or_create(TokenPath(link, "test"))
    for content, why in (("", "empty"), ("short", "does not hold a token"), ("a b" * 10, "does not hold a token")):
        bad = tmp_path / f"bad{len(content)}"
        bad.write_text(content)
        bad.chmod(0o600)
        with pytest.raises(TokenFileError, match=why):
            api_token.load_or_create(TokenPath(bad, "test"))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the file away")
def test_a_file_of_another_user_is_refused(tmp_path):
    path = tmp_path / "api-token"
    path.write_text("z" * 40)
    path.chmod(0o600)
    os.chown(path, 65534, 65534)
    with pytest.raises(TokenFileError, match="belongs to uid 65534"):
        api_token.load_or_create(TokenPath(path, "test"))


def test_where_the_file_is(tmp_path, monkeypatch):
    monkeypatch.delenv(api_token.ENV, raising=False)
    assert api_token.resolve(None, "").source == f"the default of {api_token.KEY}"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    expected = Path("/run/mlte/api-token") if os.geteuid() == 0 else tmp_path / "mlte" / "api-token"
    assert api_token.default_path() == expected
    assert api_token.resolve(None, "/etc/x") == TokenPath(Path("/etc/x"), api_token.KEY)
    monkeypatch.setenv(api_token.ENV, "/env/tok")
    assert api_token.resolve(None, "/etc/x") == TokenPath(Path("/env/tok"), api_token.ENV)
    assert api_token.resolve("/flag", "/etc/x").path == Path("/flag")


# ---- the bearer check and the API ---------------------------------------------------------------
def test_bearer_check():
    check = BearerCheck("s3cret-s3cret-s3cret")
    assert check.problem("Bearer s3cret-s3cret-s3cret") is None
    assert check.problem("bearer  s3cret-s3cret-s3cret ") is None
    assert "missing" in check.problem(None).reason and 'error="' not in check.problem(None).challenge
    for bad, why in (("Basic abc", "malformed"), ("Bearer", "malformed"), ("Bearer s3cret", "wrong token"),
                     ("Bearer s3cret-s3cret-s3cret-", "wrong token"), ("Bearer \xe9\xe9", "wrong token")):
        denied = check.problem(bad)
        assert denied is not None and why in denied.reason and 'error="invalid_token"' in denied.challenge
    assert BearerCheck(None).problem("Bearer anything") is not None  # no token loaded: closed
    assert BearerCheck(None, required=False).problem(None) is None  # [controller] api_auth = false


def call_with_headers(api, method, path, token):  # noqa: F811
    import io

    env = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": "", "CONTENT_LENGTH": "0",
           "wsgi.input": io.BytesIO(b"")}
    if token is not None:
        env["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    seen: dict = {}
    out = api.wsgi(env, lambda status, headers: seen.update(status=int(status.split()[0]), headers=dict(headers)))
    return seen["status"], seen["headers"], json.loads(b"".join(out))


def test_api_refuses_without_the_token(api):  # noqa: F811
    for method, path in (("GET", "/switches"), ("GET", "/topology"), ("POST", "/xcon"), ("POST", "/plan"),
                         ("DELETE", "/circuit"), ("GET", "/no-such-route")):
        for token in (None, "wrong-token-wrong-token"):
            status, headers, body = call_with_headers(api, method, path, token)
            assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer"), (method, path, body)
            assert set(body) == {"error"} and body["error"]  # the reason, nothing of the network
    assert call(api, "GET", "/switches")[0] == 200  # with the token
    assert call(api, "GET", "/no-such-route")[0] == 404
    assert call(api, "POST", "/xcon", {"ots": "X", "in_port": 1, "out_port": 2})[0] == 200


def test_health_is_open_but_says_nothing_about_the_network(api):  # noqa: F811
    status, body = call(api, "GET", "/health", token=None)
    assert status == 200 and set(body) == {"ok", "uptime", "auth"} and body["ok"] is True
    status, body = call(api, "GET", "/health")  # with the token: everything
    assert status == 200 and body["packet_switches"] == 1 and "failures" in body
    assert call(api, "GET", "/health", token="wrong-token-wrong-token")[0] == 401  # a wrong one is refused


def test_an_api_that_has_not_loaded_its_token_refuses_everything(api):  # noqa: F811
    api.auth = BearerCheck(None)
    assert call(api, "GET", "/switches")[0] == 401
    assert call(api, "GET", "/health", token=None)[0] == 200


# ---- the client -----------------------------------------------------------------------------------
def test_client_without_a_token_file_is_one_line_naming_file_and_key(tmp_path):
    missing = tmp_path / "nope" / "api-token"
    client = ControllerClient(port=1, token_file=str(missing))
    with pytest.raises(CredentialError) as err:
        client.switches()
    msg = str(err.value)
    assert "\n" not in msg and str(missing) in msg and api_token.KEY in msg and api_token.ENV in msg
    assert ControllerClient(port=1, token_file=str(missing), auth=False)._credential() is None


def test_cli_missing_token_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(api_token.ENV, str(tmp_path / "absent"))
    assert main(["plans", "--api-port", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(tmp_path / "absent") in err and "Traceback" not in err
    assert main(["topology", "show", "--controller", "http://127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(tmp_path / "absent") in err and "is `mlte controller` running" not in err


def test_controller_refuses_a_readable_token_file_at_start(tmp_path, capsys):
    tok = tmp_path / "api-token"
    tok.write_text("q" * 40)
    tok.chmod(0o644)
    assert main(["controller", "--db-url", "", "--api-token-file", str(tok)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(tok) in err and "0644" in err and "--api-token-file" in err


# ---- a real controller process -----------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Controller:
    """``mlte controller`` without switches, stopped by PID whatever happens."""

    def __init__(self, work: Path, token_file: Path, *extra: str) -> None:
        for attempt in range(3):
            # ports chosen free can be taken by another test's server before the controller binds them
            # (the other xdist worker): a controller that exits at start is started again on new ones
            self.api = _free_port()
            of = _free_port()
            self.log = work / f"controller-{self.api}.log"
            with open(self.log, "w") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "app.cli.main", *extra, "controller", "--of-port", str(of),
                     "--api-port", str(self.api), "--db-url", "", "--api-token-file", str(token_file)],
                    cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                wait_until(lambda: self.proc.poll() is not None or ControllerClient(port=self.api, auth=False)
                           ._try_health(), 60, "controller API to answer")
            except TimeoutError as exc:
                self.stop()
                raise AssertionError(f"the controller did not answer in 60 s; its log:\n{self.log.read_text()[-3000:]}"
                                     ) from exc
            except BaseException:
                self.stop()
                raise
            if self.proc.poll() is None:
                return
            if attempt == 2:
                raise AssertionError(f"the controller exited at start 3 times; its log:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(20)


def raw(port: int, path: str, token: str | None = None, method: str = "GET", body: dict | None = None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None)
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers, json.loads(resp.read())
    except urllib.error.HTTPError as exc:  # headers: case-insensitive
        return exc.code, exc.headers, json.loads(exc.read())


def test_a_real_controller_wants_the_token(tmp_path):
    tok = tmp_path / "state" / "api-token"
    ctl = Controller(tmp_path, tok)
    try:
        assert mode(tok) == 0o600 and mode(tok.parent) == 0o700
        token = tok.read_text().strip()
        for path, method, body in (("/switches", "GET", None), ("/topology", "GET", None),
                                   ("/names", "POST", {"names": {"0xa1": "A"}}), ("/plans", "GET", None)):
            for bad in (None, token[:-1] + ("x" if token[-1] != "x" else "y")):
                status, headers, answer = raw(ctl.api, path, bad, method, body)
                assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer") and answer["error"]
            assert raw(ctl.api, path, token, method, body)[0] == 200
        status, _, answer = raw(ctl.api, "/health")
        assert status == 200 and set(answer) == {"ok", "uptime", "auth"}
        client = ControllerClient(port=ctl.api, token_file=str(tok))
        assert client.switches() == [] and "services" in client.health()
        with pytest.raises(ControlApiError) as err:
            ControllerClient(port=ctl.api, token="not-the-token-not-the-token").switches()
        assert err.value.status == 401 and "wrong token" in str(err.value)
    finally:
        ctl.stop()
    ctl = Controller(tmp_path, tok)  # a restart: the same token, the same client works on
    try:
        assert tok.read_text().strip() == token
        assert ControllerClient(port=ctl.api, token_file=str(tok)).switches() == []
    finally:
        ctl.stop()
    assert "Traceback" not in ctl.log.read_text()


def test_a_real_controller_with_the_credential_off(tmp_path):
    """``[controller] api_auth = false``: no file made, every request served, a warning in the log."""
    cfg = tmp_path / "open.toml"
    cfg.write_text("[controller]\napi_auth = false\n")
    tok = tmp_path / "api-token"
    ctl = Controller(tmp_path, tok, "-c", str(cfg))
    try:
        assert raw(ctl.api, "/switches")[0] == 200 and not tok.exists()
    finally:
        ctl.stop()
    assert "credential OFF" in ctl.log.read_text()


def test_the_controllers_log_locks_work_between_os_threads() -> None:
    """Monkey patching greens the logging locks; the launcher gives them real ones back (a green lock
    taken by the database writer's OS thread while the hub's held it hung a controller at start)."""
    import logging

    from eventlet import patcher

    from app.controller.launcher import real_log_locks

    handler = logging.StreamHandler()
    logger = logging.getLogger("mlte.test.locks")
    logger.addHandler(handler)
    try:
        real_log_locks()
        real = type(patcher.original("threading").RLock())
        assert isinstance(handler.lock, real) and isinstance(logging._lock, real)  # type: ignore[attr-defined]
        assert all(isinstance(h.lock, real) for h in logging.getLogger().handlers)
    finally:
        logger.removeHandler(handler)
