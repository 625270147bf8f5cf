"""The packet-link table LLDP feeds: refresh, replace and expire directed links (plain logic).

Time comes in as ``now`` so the expiry rules are unit-tested without a clock.
"""
from __future__ import annotations

from typing import Protocol

from app.controller.model import PacketLink, PortRef


class LinkReader(Protocol):
    """The read side of a :class:`LinkTable` (what the network view shows its readers)."""

    def links(self) -> list[PacketLink]: ...

    def last_seen(self, link: PacketLink) -> float | None: ...

    def ports_in_links(self) -> set[PortRef]: ...


class LinkTable:
    """Directed packet links with the time each was last seen.

    A port is point-to-point: a link from the same source port, or into the same destination
    port, replaces the old one (an optical circuit was re-patched).
    """

    def __init__(self) -> None:
        self._seen: dict[PacketLink, float] = {}

    def links(self) -> list[PacketLink]:
        return sorted(self._seen)

    def last_seen(self, link: PacketLink) -> float | None:
        return self._seen.get(link)

    def seen(self, link: PacketLink, now: float) -> tuple[bool, list[PacketLink]]:
        """Record an LLDP sighting; return (is_new, links it replaced)."""
        replaced = [
            old for old in self._seen if old != link and (old.src == link.src or old.dst == link.dst)
        ]
        for old in replaced:
            del self._seen[old]
        is_new = link not in self._seen
        self._seen[link] = now
        return is_new, replaced

    def expire(self, now: float, timeout: float) -> list[PacketLink]:
        """Drop and return links not seen for longer than ``timeout`` seconds."""
        dead = [link for link, t in self._seen.items() if now - t > timeout]
        for link in dead:
            del self._seen[link]
        return sorted(dead)

    def drop_port(self, port: PortRef) -> list[PacketLink]:
        """A port went down or vanished: drop and return every link touching it."""
        dead = [link for link in self._seen if port in (link.src, link.dst)]
        for link in dead:
            del self._seen[link]
        return sorted(dead)

    def drop_switch(self, dpid: int) -> list[PacketLink]:
        dead = [link for link in self._seen if dpid in (link.src.dpid, link.dst.dpid)]
        for link in dead:
            del self._seen[link]
        return sorted(dead)

    def ports_in_links(self) -> set[PortRef]:
        return {p for link in self._seen for p in (link.src, link.dst)}
