"""Named circuits of the Fig. 2 testbed (docs/contracts.md section 2): chains of bidirectional XCONs."""
from __future__ import annotations

#: name -> [(ots, in_port, out_port), ...]
FIG2_CIRCUITS: dict[str, list[tuple[str, int, int]]] = {
    # the initial path A-X-Y-B-Y-Z-C: packet links A:3-B:1 and B:2-C:1
    "initial": [("X", 1, 2), ("Y", 1, 2), ("Y", 3, 4), ("Z", 1, 2)],
    # experiment 2, router bypass at Y: packet link A:3-C:1
    "bypass": [("X", 1, 2), ("Y", 1, 4), ("Z", 1, 2)],
    # experiment 3, A-X-Z-C: packet link A:3-C:1
    "direct": [("X", 1, 3), ("Z", 3, 2)],
    # experiment 3, the offload / elastic path: packet link A:4-C:2
    "offload": [("X", 4, 5), ("Z", 5, 4)],
}

#: The packet links (switch, port, switch, port) each circuit creates.
FIG2_CIRCUIT_LINKS: dict[str, list[tuple[str, int, str, int]]] = {
    "initial": [("A", 3, "B", 1), ("B", 2, "C", 1)],
    "bypass": [("A", 3, "C", 1)],
    "direct": [("A", 3, "C", 1)],
    "offload": [("A", 4, "C", 2)],
}


def directed(links: list[tuple[str, int, str, int]]) -> set[tuple[str, int, str, int]]:
    """Both directions of each link, as LLDP reports them."""
    return {(a, ap, b, bp) for a, ap, b, bp in links} | {(b, bp, a, ap) for a, ap, b, bp in links}
