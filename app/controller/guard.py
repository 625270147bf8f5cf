"""Fail loudly: every handler is wrapped so an exception is logged with its traceback.

os-ken's event loop logs and swallows handler exceptions at debug level in places; Faucet's
``kill_on_exception`` idea, softened: we log to the ``mlte.controller.errors`` logger (and the
``[controller] log_file`` if set) and count the failures so tests can assert there were none.
"""
from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

ERROR_LOG = logging.getLogger("mlte.controller.errors")
F = TypeVar("F", bound=Callable[..., Any])

#: Number of handler exceptions since start (exposed by ``GET /health``).
failures: list[str] = []


def loud(func: F) -> F:
    """Decorator: log any exception escaping ``func`` with a traceback, then re-raise it."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Exception as exc:
            failures.append(f"{func.__qualname__}: {exc!r}")
            ERROR_LOG.exception("handler %s failed", func.__qualname__)
            raise

    return wrapper  # type: ignore[return-value]


def add_log_file(path: str) -> None:
    """Also write handler exceptions to ``path``."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    ERROR_LOG.addHandler(handler)
