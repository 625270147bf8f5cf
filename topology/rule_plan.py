"""Every rule the controller installs: its table, priority band and cookie, declared in one place.

Faucet-style: each app owns a *band* (a priority range in a table) and a cookie *kind* byte, so no two
apps can shadow or delete each other's rules. A cookie is ``0x4d4c5445`` ("MLTE") in the upper 32
bits, an optional 24-bit id (a reservation, a steered flow, a counting rule) and the kind byte:
``0x4d4c5445_iiiiii_kk``. Deleting with :meth:`Band.mask` removes exactly one app's rules (or, with
an id, exactly one object's rules).

The bands, highest first (packet switches, OpenFlow 1.3, table 0):

====================  ========  ===========  ===========================================
band                  kind      priorities   what
====================  ========  ===========  ===========================================
``lldp``              0x01      65000        LLDP to the controller
``probe``             0x20      64000        latency probe trap (ethertype 0x88b5)
``steer``             0x40      40000-40999  one 5-tuple moved onto another path (TE loop)
``mapping``           0x60      35000-35999  a site pair's flows spread over its paths (load-aware mapping)
``reservation``       0x50      30000-30999  a reservation's traffic onto its circuit
``split``             0x41      20000-20999  a share of a link's traffic onto a parallel circuit
                                             (balanced growth; masked TCP/UDP source port)
``flow_count``        0x31      200          per-5-tuple counting rules (fine monitoring)
``flow_learn``        0x30      150          learn trap for counting (fine monitoring)
``arp``               0x02      110          every ARP to the controller (proxy ARP)
``forwarding``        0x02      100          ``eth_dst -> output`` shortest-path rules
``table_miss``        0x02      0            everything else to the controller
====================  ========  ===========  ===========================================

OTS nodes (OpenFlow 1.0) carry only XCONs: band ``xcon``, kind 0x10, the OF1.0 default priority.
Steered flows sit above mapped and reserved ones so an elephant of either can still be moved (mapped
flows above reservations, so a reservation's flows can be spread over its circuits); both sit
above the monitor's counting rules, whose counters therefore miss steered traffic (the steer and
reservation rules' own counters count it). Split rules sit *below* reservations (they match by
destination address, not by port, and must never pull a reservation's traffic off its circuit) and
below steered elephants (a moved elephant stays moved).

Meters (OpenFlow 1.3, packet switches): an elastic reservation's ingress rules pass meter
:func:`reservation_meter` (the reservation id; one meter per switch), whose rate is the bandwidth
provisioned for it so far.

Groups (OpenFlow 1.3, packet switches): a 1+1 protected reservation's ingress rules output to
fast-failover group :func:`reservation_group` (the reservation id; one group per switch), whose
buckets are the working port, then the protection port.

Plain values (no os-ken import), kept in ``topology/``, the bottom layer, because the controller
apps, the update planner, the TE managers and the monitor (``monitor/flowstats.py``) all read it
(docs/architecture.md, "Layers").
"""
from __future__ import annotations

from dataclasses import dataclass

COOKIE_BASE = 0x4D4C5445 << 32  # "MLTE"
PREFIX_MASK = 0xFFFFFFFF00000000
KIND_BITS = 0xFF
ID_LIMIT = 1 << 24
ALL_BITS = 0xFFFFFFFFFFFFFFFF

OF13 = "of13"  # packet switches
OF10 = "of10"  # OTS nodes


@dataclass(frozen=True)
class Band:
    """One app's rules: where they sit (table, priority range) and how they are tagged (cookie kind)."""

    name: str
    owner: str  # the app (or manager) that installs and deletes them
    kind: int  # cookie kind byte
    low: int  # lowest priority of the band
    high: int  # highest priority of the band
    table: int = 0
    protocol: str = OF13
    with_id: bool = False  # cookies carry a 24-bit object id

    def cookie(self, ident: int = 0) -> int:
        """The cookie of one rule of this band (``ident`` only for bands whose rules carry an id)."""
        if ident and not self.with_id:
            raise ValueError(f"band {self.name!r} rules carry no id")
        if not 0 <= ident < ID_LIMIT:
            raise ValueError(f"cookie id {ident} out of range 0..{ID_LIMIT - 1}")
        return COOKIE_BASE | ident << 8 | self.kind

    def mask(self, by_id: bool = False) -> int:
        """Cookie mask selecting every rule of this band, or (``by_id``) of one object in it."""
        return PREFIX_MASK | ((ID_LIMIT - 1) << 8 if by_id else 0) | KIND_BITS

    def priority(self, offset: int = 0) -> int:
        """``low + offset``; ValueError if that leaves the band."""
        p = self.low + offset
        if not self.low <= p <= self.high:
            raise ValueError(f"priority {p} outside band {self.name!r} ({self.low}..{self.high})")
        return p

    def owns(self, cookie: int) -> bool:
        return cookie & PREFIX_MASK == COOKIE_BASE and cookie & KIND_BITS == self.kind


LLDP = Band("lldp", "mlte_lldp", 0x01, 65000, 65000)
PROBE = Band("probe", "mlte_monitor", 0x20, 64000, 64000)
STEER = Band("steer", "te_loop", 0x40, 40000, 40999, with_id=True)
MAPPING = Band("mapping", "te_mapping", 0x60, 35000, 35999, with_id=True)
RESERVATION = Band("reservation", "reservations", 0x50, 30000, 30999, with_id=True)
SPLIT = Band("split", "te_loop", 0x41, 20000, 20999, with_id=True)
FLOW_COUNT = Band("flow_count", "mlte_monitor", 0x31, 200, 200, with_id=True)
FLOW_LEARN = Band("flow_learn", "mlte_monitor", 0x30, 150, 150, with_id=True)
ARP = Band("arp", "mlte_forwarding", 0x02, 110, 110)
FORWARDING = Band("forwarding", "mlte_forwarding", 0x02, 100, 100)
TABLE_MISS = Band("table_miss", "mlte_forwarding", 0x02, 0, 0)
XCON = Band("xcon", "mlte_ots_driver", 0x10, 0x8000, 0x8000, protocol=OF10)

BANDS: tuple[Band, ...] = (LLDP, PROBE, STEER, MAPPING, RESERVATION, SPLIT, FLOW_COUNT, FLOW_LEARN, ARP,
                           FORWARDING, TABLE_MISS, XCON)


METER_MAX = 0xFFFF0000  # OFPM_MAX: the highest meter id of OpenFlow 1.3


def reservation_meter(reservation_id: int) -> int:
    """The meter of an elastic reservation's ingress rules (its id: one reservation, one meter per switch)."""
    if not 1 <= reservation_id < ID_LIMIT:
        raise ValueError(f"reservation id {reservation_id} out of range 1..{ID_LIMIT - 1}")
    return reservation_id


GROUP_MAX = 0xFFFFFF00  # OFPG_MAX: the highest group id of OpenFlow 1.3


def reservation_group(reservation_id: int) -> int:
    """The fast-failover group of a 1+1 protected reservation's ingress rules (its id, like its meter)."""
    if not 1 <= reservation_id < ID_LIMIT:
        raise ValueError(f"reservation id {reservation_id} out of range 1..{ID_LIMIT - 1}")
    return reservation_id


def band_of(cookie: int) -> Band | None:
    """The band a cookie belongs to (the forwarding app's three bands share one kind: ``forwarding``)."""
    for band in BANDS:
        if band.owns(cookie):
            return FORWARDING if band.kind == FORWARDING.kind else band
    return None


def cookie_id(cookie: int) -> int:
    """The 24-bit object id inside a cookie."""
    return (cookie >> 8) & (ID_LIMIT - 1)


def check(bands: tuple[Band, ...] = BANDS) -> None:
    """ValueError unless priority ranges in a table never overlap and only one owner uses a kind."""
    owners: dict[int, str] = {}
    for b in bands:
        if b.low > b.high:
            raise ValueError(f"band {b.name!r}: low {b.low} > high {b.high}")
        if owners.setdefault(b.kind, b.owner) != b.owner:
            raise ValueError(f"cookie kind {b.kind:#04x} used by {owners[b.kind]} and {b.owner}")
    for i, a in enumerate(bands):
        for b in bands[i + 1:]:
            if (a.protocol, a.table) == (b.protocol, b.table) and a.low <= b.high and b.low <= a.high:
                raise ValueError(f"bands {a.name!r} and {b.name!r} overlap in {a.protocol} table {a.table}")


check()
