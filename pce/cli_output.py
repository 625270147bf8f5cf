"""Output files of the ``mlte pce`` commands: checked before the computation, written whole.

A long solve or simulation must not end in a traceback that loses its result because ``--json``
names a missing directory or a directory: :func:`check_writable` refuses such a path up front.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pce.errors import InvalidInputError


def check_writable(path: str | None, flag: str = "--json") -> None:
    """Refuse (one line, naming ``flag``) a path the result could not be written to; ``None``/"-" pass."""
    if not path or path == "-":
        return
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise InvalidInputError(f"{flag} {path}: is a directory; give a file name, e.g. {p / 'result.json'}")
    if not parent.is_dir():
        raise InvalidInputError(f"{flag} {path}: directory {parent} does not exist; create it or pick another path")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise InvalidInputError(f"{flag} {path}: not writable; pick another path")


def write_json_file(path: str, doc: Any, indent: int | None = None) -> None:
    """Write ``doc`` whole or not at all (a temporary file renamed over the target)."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=indent)
            fh.write("\n")
        tmp.replace(p)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InvalidInputError(f"{path}: cannot write ({exc.strerror})") from None
