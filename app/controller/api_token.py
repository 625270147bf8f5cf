"""The control API's credential: a random bearer token in a file only its owner can read.

Why a file: the control API listens on 127.0.0.1, where every local user can connect; what tells
the controller's operator (and the labs, the ``mlte`` commands) from any other local user is that
only they can read the token file. The controller creates it once (``secrets.token_urlsafe``) and
reuses it on every restart, so clients keep working; it refuses a file that group or others can read,
or that belongs to another user (someone else would know the token). Clients only need to read it.

Where: ``[controller] api_token_file``, overridden by ``MLTE_API_TOKEN_FILE`` and by an explicit
argument (``mlte controller --api-token-file``, ``ControllerClient(token_file=...)``); when all are
empty, :func:`default_path`. Stdlib only: the Python client (labs, tests) imports it.
"""
from __future__ import annotations

import errno
import hmac
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

ENV = "MLTE_API_TOKEN_FILE"
KEY = "[controller] api_token_file"
#: characters a token may hold (secrets.token_urlsafe's, plus what a hand-written one may use) and
#: its shortest length: a header value, and not guessable
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=")
MIN_LEN = 16


class TokenFileError(Exception):
    """The token file cannot be created, read or trusted (a one-line reason naming the file and the key)."""

    user_error = True


def default_path() -> Path:
    """``/run/mlte/api-token`` for root, else ``$XDG_STATE_HOME/mlte/api-token`` (``~/.local/state``).

    Root gets /run (a root-owned tmpfs, the place of a system daemon's runtime files) rather than a
    path under ``$HOME``: whether ``sudo`` keeps the caller's ``HOME`` depends on the sudoers policy,
    so a HOME path could differ between ``sudo mlte controller`` and ``sudo mlte plans``, or leave a
    root-owned directory in the user's home. A user's controller keeps its token with its other state.
    """
    if os.geteuid() == 0:
        return Path("/run/mlte/api-token")
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "mlte" / "api-token"


@dataclass(frozen=True)
class TokenPath:
    """Where the token is, and which setting said so (for error messages)."""

    path: Path
    source: str


def resolve(explicit: str | os.PathLike | None = None, configured: str = "",
            explicit_name: str = "--api-token-file") -> TokenPath:
    """The token file: ``explicit`` > ``$MLTE_API_TOKEN_FILE`` > ``configured`` > :func:`default_path`."""
    if explicit:
        return TokenPath(Path(explicit).expanduser(), explicit_name)
    if env := os.environ.get(ENV, "").strip():
        return TokenPath(Path(env).expanduser(), ENV)
    if configured:
        return TokenPath(Path(configured).expanduser(), KEY)
    return TokenPath(default_path(), f"the default of {KEY}")


def _check_token(text: str, where: TokenPath) -> str:
    token = text.strip()
    if not token:
        raise TokenFileError(f"API token file {where.path} ({where.source}) is empty; delete it and restart "
                             f"the controller to make a new one")
    if len(token) < MIN_LEN or not set(token) <= _TOKEN_CHARS:
        raise TokenFileError(f"API token file {where.path} ({where.source}) does not hold a token "
                             f"(one line of at least {MIN_LEN} characters A-Z a-z 0-9 -._~+/=)")
    return token


def _read_owned(where: TokenPath) -> str:
    """The token of an existing file, checked as the controller must: a regular file of ours, 0600 or
    stricter (not a symlink: whoever can change the link chooses the token)."""
    try:
        fd = os.open(where.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        why = "a symbolic link (give the real file)" if exc.errno == errno.ELOOP else exc.strerror or exc
        raise TokenFileError(f"cannot read API token file {where.path} ({where.source}): {why}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise TokenFileError(f"API token file {where.path} ({where.source}) is not a regular file")
        if st.st_uid != os.geteuid():
            raise TokenFileError(f"API token file {where.path} ({where.source}) belongs to uid {st.st_uid}, "
                                 f"not to this user (uid {os.geteuid()}); refusing a token someone else chose")
        if st.st_mode & 0o077:
            raise TokenFileError(f"API token file {where.path} ({where.source}) has mode "
                                 f"{stat.S_IMODE(st.st_mode):04o}: group/others may read it; "
                                 f"`chmod 600 {where.path}` (and make a new token if it leaked)")
        raw = f.read(4096)
    return _check_token(raw.decode("ascii", errors="replace"), where)


def load_or_create(where: TokenPath) -> str:
    """The controller's token: the file's if it exists (checked by :func:`_read_owned`), else a new
    one written to a fresh 0600 file.

    The new file appears complete and 0600 from its first instant: the token goes into a temporary
    file made with ``O_CREAT | O_EXCL`` and mode 0600 next to it, which is then hard-linked to the
    final name (``link`` fails if that exists: two controllers starting at once end up with one token).
    The parent directory is made 0700 when missing.
    """
    path = where.path
    if path.exists() or path.is_symlink():
        return _read_owned(where)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise TokenFileError(f"cannot create the directory of API token file {path} ({where.source}): "
                             f"{exc.strerror or exc}") from None
    token = secrets.token_urlsafe(32)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, (token + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:  # another controller was quicker: use its token
            return _read_owned(where)
    except OSError as exc:
        raise TokenFileError(f"cannot create API token file {path} ({where.source}): {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return token


def read_for_client(where: TokenPath) -> str:
    """A client's token: the file must only be readable by us (the permissions are the controller's
    to enforce: it made the file)."""
    try:
        text = where.path.read_text(encoding="ascii", errors="replace")
    except OSError as exc:
        hint = " (is the controller started? it creates the file)" if isinstance(exc, FileNotFoundError) else ""
        raise TokenFileError(f"cannot read the control API token file {where.path} ({where.source}; set by "
                             f"{KEY} or {ENV}): {exc.strerror or exc}{hint}") from None
    return _check_token(text, where)


class Denied(NamedTuple):
    """Why a request is refused (the 401 body) and the ``WWW-Authenticate`` challenge (RFC 6750)."""

    reason: str
    challenge: str


_ASK = 'Bearer realm="mlte"'
_INVALID = 'Bearer realm="mlte", error="invalid_token"'


class BearerCheck:
    """The API side: does an ``Authorization`` header carry the token? (constant-time comparison)

    ``token=None`` with ``required=True`` refuses every request (an API that has not loaded its token
    yet fails closed); ``required=False`` (``[controller] api_auth = false``) lets everything in.
    """

    def __init__(self, token: str | None, required: bool = True) -> None:
        self._want = token.encode("ascii") if token is not None else None
        self.required = required

    def problem(self, header: str | None) -> Denied | None:
        """None when the request may go on, else why it may not."""
        if not self.required:
            return None
        if not header:
            return Denied("missing credential: send 'Authorization: Bearer <token>' (the token is in the "
                          f"controller's {KEY})", _ASK)
        scheme, _, value = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            return Denied("malformed Authorization header: expected 'Bearer <token>'", _INVALID)
        if self._want is None:
            return Denied("the controller has no API token loaded", _INVALID)
        # WSGI hands header values over as latin-1 text: back to the bytes that were sent
        given = value.strip().encode("latin-1", errors="replace")
        if not hmac.compare_digest(given, self._want):
            return Denied("wrong token", _INVALID)
        return None
