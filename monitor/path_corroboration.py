"""Corroborate a latency change point with what the controller knows of the link's path.

The path-change detector ("Path Persistence in the Cloud", Reda et al., ACM CCR 2020) infers a path
change from the latency alone, because a cloud tenant cannot see the provider's paths. A packet link
over one of our own circuits is different: the controller lit its cross-connects and knows its light
path hop by hop. A change point on such a link while the light path is the same is a *latency
shift* (the switches' load, queueing), not a path change: the demo's userspace switches moved the
probes' latency by ~1 ms while an elephant ran and the detector called it a path change on circuits
nobody touched. So a change point is:

- ``path_change`` when the link's light path changed since the detector's base was set, or when the
  controller does not know the path beneath the link (a plain packet link: the seed's case);
- ``latency_shift`` when the link is one of our circuits and its light path is unchanged.

Plain code: the caller hands in each link's light path (hops, ``None`` when unknown).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from monitor.probes import PATH_CHANGE

LATENCY_SHIFT = "latency_shift"

Route = tuple[Any, ...] | None  # a circuit's hops, e.g. (("X", 1, 2), ("Y", 1, 2)); None: unknown


class RouteMemory:
    """The light path each probed link had when its detector last set its base."""

    def __init__(self) -> None:
        self._at_base: dict[str, Route] = {}

    def seen(self, link: str, route: Route) -> None:
        """A probe of ``link`` came back: remember its path if it has none yet (the base is being set)."""
        self._at_base.setdefault(link, route)

    def judge(self, link: str, route: Route) -> tuple[str, dict[str, Any]]:
        """The kind and detail of a change point on ``link`` whose light path is now ``route``; the
        remembered path becomes ``route`` (the detector's new base)."""
        before = self._at_base.get(link, route)
        self._at_base[link] = route
        if route is None:
            return PATH_CHANGE, {"route": "unknown"}
        if before == route:
            return LATENCY_SHIFT, {"route": "unchanged", "hops": [list(h) for h in route]}
        return PATH_CHANGE, {"route": "changed", "hops_before": None if before is None else [list(h) for h in before],
                             "hops": [list(h) for h in route]}

    def forget_except(self, links: Iterable[str]) -> None:
        """Drop links no longer probed (their detectors start afresh when they come back)."""
        keep = set(links)
        for link in [k for k in self._at_base if k not in keep]:
            del self._at_base[link]
