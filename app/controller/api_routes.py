"""Extra control-API routes other apps contribute (e.g. the monitor's ``GET /monitor/latency``).

An os-ken context (:data:`CONTEXT`) shared by the control API and the apps that add read endpoints,
so they register handlers here instead of reaching into the API app by name.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CONTEXT = "mlte_api_routes"


@dataclass(frozen=True)
class Text:
    """An answer that is not JSON (``GET /metrics``: the Prometheus text format), sent as it is."""

    body: bytes
    content_type: str


Handler = Callable[[dict, dict], Any]  # (query, JSON body) -> JSON-able answer or (status, answer)


class ApiRoutes(dict[tuple[str, str], Handler]):
    """``{(method, path): handler}``; the control API serves these next to its own routes."""

    def add(self, method: str, path: str, handler: Handler) -> None:
        if (method, path) in self:
            raise ValueError(f"route {method} {path} is already registered")
        self[(method, path)] = handler
