"""Exceptions of the path computation element; one base class so callers can catch them all.

Every class here is a user-facing error (``user_error = True``): the CLI prints its message and
exits non-zero, the REST API turns it into a 4xx with the reason.
"""
from __future__ import annotations


class PceError(Exception):
    """Base class: the request cannot be served as asked."""

    user_error = True


class InvalidInputError(PceError, ValueError):
    """A parameter is malformed (negative bandwidth, end before start, unknown option...)."""


class UnknownTopologyError(PceError, LookupError):
    """A topology name (topohub or file) or a node/endpoint in it does not exist."""


class NoPathError(PceError):
    """No path satisfies the constraints; ``bottleneck`` names the limiting link or port."""

    def __init__(self, message: str, *, bottleneck: str | None = None, available: float | None = None):
        super().__init__(message)
        self.bottleneck = bottleneck
        self.available = available


class InfeasibleError(PceError):
    """An optimisation model has no feasible solution."""


class SolverError(PceError):
    """The LP/MIP solver failed or is not available."""
