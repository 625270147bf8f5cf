"""Exceptions of the topology package; one base class so callers can catch them all.

Every class here is user-facing (``user_error = True``): the CLI prints the message without a
traceback, the controller and the web service report it as a bad input.
"""
from __future__ import annotations


class TopologyError(Exception):
    """An invalid graph operation or input (unknown node, port already used, bad granularity...)."""

    user_error = True


class VendorFileError(TopologyError):
    """A static vendor topology file is unreadable or violates the schema.

    ``file`` is the file name, ``path`` the location inside the document (``ots[0].ports.7``).
    """

    def __init__(self, file: str, path: str, reason: str):
        self.file = file
        self.path = path
        self.reason = reason
        where = f"{file}: {path}" if path else file
        super().__init__(f"{where}: {reason}")


class SpecError(TopologyError):
    """A lab specification is inconsistent (duplicate port, unknown node, bad granularity...)."""
