"""The reservation page's "Restorations": each repair the controller recorded after a failure
(docs/failures.md), with the old and new path as the node sequence a person reads (``A → X:1 → X:3 ⇒
Z:3 → Z:2 → C``, ``⇒`` a fibre) instead of the stored edge keys, and the fibres that changed marked:
on the old path those the new one left (the failure is among them), on the new one those it took.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import Restoration
from topology.errors import TopologyError

if TYPE_CHECKING:
    from topology.graph import MultiLayerGraph

#: the separator drawn for a hop over an edge of this kind (anything else: ``→``)
SEPARATORS = {"optical": "⇒"}
SKIPPED = ("access",)  # host links: the path's node list leaves the hosts out too


def _kind(key: str) -> str:
    return key.partition(":")[0]


def _node(g: MultiLayerGraph, label: str) -> str:
    """The node an edge key's end label names: itself (``X:1``, ``h1``) or a switch port's switch."""
    if label in g.g:
        return label
    switch = label.rpartition(":")[0]
    return switch if switch in g.g else label


def _ends(g: MultiLayerGraph, key: str) -> tuple[str, str]:
    """The two nodes of edge ``key``: from the graph, or — for an edge it no longer has — read from the
    key itself (``kind:LO-HI``; the split taken where both sides name nodes of the graph, if any)."""
    try:
        return g.edge_ends(key)
    except TopologyError:
        pass
    rest = key.partition(":")[2]
    cuts = [i for i, ch in enumerate(rest) if ch == "-"]
    for i in cuts:
        a, b = _node(g, rest[:i]), _node(g, rest[i + 1:])
        if a in g.g and b in g.g:
            return a, b
    i = cuts[len(cuts) // 2] if cuts else len(rest)
    return _node(g, rest[:i]), _node(g, rest[i + 1:])


def hops(g: MultiLayerGraph, edges: Sequence[str]) -> list[tuple[str, str, str]]:
    """``(from, to, key)`` per edge of a stored path, oriented from its source on: each edge starts where
    the one before ended; the first starts at the end it does not share with the second. A path that
    is not contiguous starts again at the gap."""
    keyed = [(k, _ends(g, k)) for k in edges if _kind(k) not in SKIPPED]
    out: list[tuple[str, str, str]] = []
    here: str | None = None
    for i, (key, (a, b)) in enumerate(keyed):
        if here not in (a, b):
            following = keyed[i + 1][1] if i + 1 < len(keyed) else ()
            here = b if a in following and b not in following else a
        there = b if here == a else a
        out.append((here, there, key))
        here = there
    return out


def route(g: MultiLayerGraph, edges: Sequence[str], changed: set[str], mark: str) -> list[dict[str, str]]:
    """The path as tokens for the template — nodes and the separators between them, each ``{"text",
    "cls", "title"}``; a fibre in ``changed`` gets class ``mark`` on its separator and both its ends."""
    tokens: list[dict[str, str]] = []
    for a, b, key in hops(g, edges):
        hit = _kind(key) == "optical" and key in changed
        cls = mark if hit else ""
        if not tokens or tokens[-1]["text"] != a:
            if tokens:
                tokens.append({"text": " … ", "cls": "", "title": "the stored path has a gap here"})
            tokens.append({"text": a, "cls": cls, "title": ""})
        elif hit:
            tokens[-1]["cls"] = cls
        sep = SEPARATORS.get(_kind(key), "→")
        tokens.append({"text": f" {sep} ", "cls": cls, "title": key})
        tokens.append({"text": b, "cls": cls, "title": ""})
    return tokens


def rows(db: Session, g: MultiLayerGraph, res_id: int) -> list[dict[str, Any]]:
    """The reservation's restorations, newest first, as the page shows them."""
    out = []
    for r in db.execute(select(Restoration).where(Restoration.reservation_id == res_id)
                        .order_by(Restoration.id.desc())).scalars():
        old, new = list(r.old_path or []), list(r.new_path or [])
        fibres_old = {k for k in old if _kind(k) == "optical"}
        fibres_new = {k for k in new if _kind(k) == "optical"}
        gone = fibres_old - fibres_new if new else set()  # no new path: nothing to compare with
        out.append({"id": r.id, "cause": r.cause, "outcome": r.outcome, "reason": r.reason, "attempt": r.attempt,
                    "detected_ts": r.detected_ts, "started_ts": r.started_ts, "finished_ts": r.finished_ts,
                    "took_s": None if r.finished_ts is None else round(r.finished_ts - r.detected_ts, 3),
                    "old": route(g, old, gone, "fibre-gone"),
                    "new": route(g, new, fibres_new - fibres_old, "fibre-new"),
                    "gone": sorted(gone), "taken": sorted(fibres_new - fibres_old) if old else []})
    return out
