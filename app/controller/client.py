"""Python client of the controller's local control API (stdlib only: usable from labs and tests).

Every method returns the decoded JSON; an HTTP error raises :class:`ControlApiError` carrying the
status and the JSON body (e.g. the OpenFlow error an OTS returned for an XCON). Every request carries
the API's bearer token (:mod:`app.controller.api_token`), read from its file at the first request
(the controller may make the file after the client was built) and again after a 401.
"""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from app.controller import api_token


class ControlApiError(Exception):
    """The control API answered with an error status (or could not be reached)."""

    user_error = True

    def __init__(self, status: int, body: Any, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class CredentialError(ControlApiError):
    """The client has no usable token: its file is missing or unreadable (nothing was sent)."""


class ControllerClient:
    """``ControllerClient(port=8181)``, or ``ControllerClient(url="http://host:port")``.

    The credential: ``token="..."``, or ``token_file=PATH``; by default ``$MLTE_API_TOKEN_FILE``, else
    ``token_config`` (a ``[controller] api_token_file`` value), else the controller's default file.
    ``auth=False`` sends none (a controller run with ``[controller] api_auth = false``).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 8181, timeout: float = 30.0,
                 url: str | None = None, token: str | None = None, token_file: str | None = None,
                 token_config: str = "", auth: bool = True) -> None:
        self.base = url.rstrip("/") if url else f"http://{host}:{port}"
        self.timeout = timeout
        self.auth = auth
        self.token_path = api_token.resolve(token_file, token_config, explicit_name="token_file")
        self._token = token
        self._token_from_file = token is None

    def _credential(self, fresh: bool = False) -> str | None:
        """The token to send (read from its file the first time, or again with ``fresh``)."""
        if not self.auth:
            return None
        if self._token is None or (fresh and self._token_from_file):
            try:
                self._token = api_token.read_for_client(self.token_path)
            except api_token.TokenFileError as exc:
                raise CredentialError(0, None, str(exc)) from None
        return self._token

    def request(self, method: str, path: str, body: dict | None = None, timeout: float | None = None) -> Any:
        try:
            return self._request(method, path, body, timeout, self._credential)
        except ControlApiError as exc:
            if exc.status != 401 or not self._token_from_file or not self.auth:
                raise
            old = self._token
            if self._credential(fresh=True) == old:  # the file still has the token refused
                raise ControlApiError(401, exc.body, f"{exc} (token from {self.token_path.path}, "
                                                     f"{self.token_path.source})") from None
        # the controller made a new token (its file was deleted): a 401 means nothing was done, so again
        return self._request(method, path, body, timeout, self._credential)

    def _request(self, method: str, path: str, body: dict | None, timeout: float | None,
                 token: Callable[[], str | None]) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        try:
            req = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        except ValueError as exc:  # "notaurl", "http://[::1": a usage error, not a traceback
            raise ControlApiError(0, None, f"bad controller API URL {self.base!r}: {exc}") from None
        if (value := token()) is not None:
            req.add_header("Authorization", f"Bearer {value}")
        status = 0
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                status, raw = resp.status, resp.read()
            return json.loads(raw or b"null")
        except ValueError as exc:  # not JSON: something else answers on that port
            raise ControlApiError(status, None, f"{method} {path}: the answer from {self.base} is not JSON "
                                                f"({exc}); is that the controller API?") from None
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                payload = json.loads(raw)
            except ValueError:  # not our API (e.g. an HTML error page): one line of it
                payload = " ".join(raw.decode(errors="replace").split())[:200]
            msg = payload.get("error") if isinstance(payload, dict) and "error" in payload else payload
            raise ControlApiError(exc.code, payload, f"{method} {path}: HTTP {exc.code}: {msg}") from None
        except (urllib.error.URLError, OSError) as exc:  # refused, reset, timed out, bad host
            reason = getattr(exc, "reason", exc)
            raise ControlApiError(0, None, f"controller API at {self.base} unreachable ({reason})") from None

    # ---- endpoints -------------------------------------------------------------------------------
    def health(self) -> dict:
        """The full health record (needs the token); :meth:`alive` needs none."""
        return self.request("GET", "/health")

    def alive(self) -> dict:
        """``GET /health`` without the credential: ``{"ok", "uptime"}``, whether or not a token is at hand
        (waiting for a controller that has not made its token file yet)."""
        return self._request("GET", "/health", None, None, lambda: None)

    def switches(self) -> list[dict]:
        return self.request("GET", "/switches")

    def links(self) -> list[dict]:
        return self.request("GET", "/links")

    def hosts(self) -> list[dict]:
        return self.request("GET", "/hosts")

    def topology(self, sources: str | None = None) -> dict:
        return self.request("GET", "/topology" + (f"?sources={sources}" if sources else ""))

    def xcons(self) -> list[dict]:
        return self.request("GET", "/xcon")

    def xcon(self, ots: str, in_port: int, out_port: int, bidirectional: bool = True) -> dict:
        return self.request("POST", "/xcon", {"ots": ots, "in_port": in_port, "out_port": out_port,
                                              "bidirectional": bidirectional})

    def remove_xcon(self, ots: str, in_port: int, bidirectional: bool = True) -> dict:
        return self.request("DELETE", "/xcon", {"ots": ots, "in_port": in_port, "bidirectional": bidirectional})

    def circuit(self, xcons: list[tuple[str, int, int]], parallel: bool = False) -> dict:
        return self.request("POST", "/circuit", {"xcons": [{"ots": o, "in_port": a, "out_port": b}
                                                           for o, a, b in xcons], "parallel": parallel})

    def remove_circuit(self, xcons: list[tuple[str, int, int]]) -> dict:
        return self.request("DELETE", "/circuit", {"xcons": [{"ots": o, "in_port": a} for o, a, _ in xcons]})

    def scan(self, all_ports: bool = False, timeout: float = 300.0) -> dict:
        return self.request("POST", "/scan", {"all": all_ports}, timeout=timeout)

    def load_static(self, path: str) -> dict:
        return self.request("POST", "/static", {"path": path})

    def set_names(self, names: dict[int, str]) -> dict:
        return self.request("POST", "/names", {"names": {hex(k): v for k, v in names.items()}})

    def flowmod(self, ots: str, match: dict, out_port: int | None = None) -> dict:
        return self.request("POST", "/flowmod", {"ots": ots, "match": match, "out_port": out_port})

    def events(self, since: int = 0, kind: str | None = None) -> list[dict]:
        path = f"/events?since={since}" + (f"&type={kind}" if kind else "")
        return self.request("GET", path)

    # ---- waiting ---------------------------------------------------------------------------------
    def wait_ready(self, timeout: float = 20.0) -> dict:
        return wait_until(lambda: self._try_health(), timeout, "controller API to answer")

    def _try_health(self) -> dict | None:
        """The controller's liveness answer, or None while nothing answers (no credential needed)."""
        try:
            return self.alive()
        except ControlApiError:
            return None


def wait_until(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    """Poll ``check`` until it returns something truthy; TimeoutError naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
