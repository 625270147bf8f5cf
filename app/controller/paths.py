"""Forwarding plan over the discovered packet links (plain logic, no os-ken).

For every known host the plan is a shortest-path tree towards the host's edge port: each switch
that can reach the host's switch gets one rule ``eth_dst = host mac -> output port``. The
forwarding app diffs successive plans and sends only the changes, so a lost link re-routes (or
removes) exactly the rules that used it.
"""
from __future__ import annotations

from collections.abc import Iterable

import networkx as nx

from app.controller.model import HostInfo, PacketLink

#: dpid -> {mac: out_port}
Plan = dict[int, dict[str, int]]


def link_graph(switches: Iterable[int], links: Iterable[PacketLink]) -> nx.DiGraph:
    """Directed graph of packet switches; edge u->v carries ``port`` (u's port towards v).

    Parallel links keep the lowest port so the plan is deterministic.
    """
    g = nx.DiGraph()
    g.add_nodes_from(switches)
    for link in sorted(links):
        u, v = link.src.dpid, link.dst.dpid
        if u in g and v in g and not g.has_edge(u, v):
            g.add_edge(u, v, port=link.src.port_no)
    return g


def plan(g: nx.DiGraph, hosts: Iterable[HostInfo]) -> Plan:
    """The rules every switch needs to deliver to every host along shortest paths."""
    out: Plan = {n: {} for n in g}
    for host in hosts:
        d = host.port.dpid
        if d not in g:
            continue
        out[d][host.mac] = host.port.port_no
        # shortest paths from every switch to d (reverse BFS; ties broken by sorted node order)
        paths = nx.shortest_path(g, target=d)
        for u, path in paths.items():
            if u != d and len(path) > 1:
                out[u][host.mac] = g.edges[u, path[1]]["port"]
    return out


def diff(old: Plan, new: Plan) -> tuple[list[tuple[int, str, int]], list[tuple[int, str]]]:
    """Rules to (re)install as (dpid, mac, port) and rules to delete as (dpid, mac)."""
    install = [
        (dpid, mac, port)
        for dpid, rules in new.items()
        for mac, port in rules.items()
        if old.get(dpid, {}).get(mac) != port
    ]
    delete = [
        (dpid, mac) for dpid, rules in old.items() for mac in rules if mac not in new.get(dpid, {})
    ]
    return sorted(install), sorted(delete)


def reachable(g: nx.DiGraph, dpid: int) -> set[int]:
    """Switches that ``dpid`` can reach (its own included)."""
    if dpid not in g:
        return set()
    return set(nx.descendants(g, dpid)) | {dpid}
