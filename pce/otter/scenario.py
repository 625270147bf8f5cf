"""Instances of the OTTER problem: the overlay network (paths, links, destinations) and flows.

``generate_network`` follows Table 4: S sources, D destinations (25% DCs, rest edge sites), K paths
per source/destination pair with metrics sampled from the measured distributions. *Choice* (paper
gives only per-path throughput): each path crosses three links so that paths share capacity and c3
binds: the source access link (s, k), a core link of its own (capacity = its sampled throughput) and
the destination access link (d, k). Access links carry ``shared_factor`` × the sum of the sampled
throughput of the paths that use them. Units: Mbit/s, ms, loss in percent; resources in cores/GB.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pce.errors import InvalidInputError, UnknownTopologyError
from pce.otter.demand import IGNORE, LINEAR, RATIONAL, STEP
from pce.otter.profiles import PROFILES

RESOURCES = ("vcpu", "ram_gb", "disk_gb")

# Table 4 (min, max, avg, std) — throughput Gbit/s, RTT ms, jitter ms, loss %.
THROUGHPUT_GBPS = (4.0, 20.8, 13.7, 1.6)
RTT_DC_MS = (69.2, 150.8, 92.2, 18.2)
RTT_EDGE_MS = (3.2, 34.6, 24.8, 7.2)
JITTER_MS = (0.008, 38.0, 0.62, 1.38)
LOSS_PCT = (0.0, 4.3, 0.06, 0.16)
EDGE_CAPACITY = ((128.0, 4096.0), (128.0, 4096.0), (1024.0, 32768.0))
FLOW_NEEDS = ((1.0, 128.0), (1.0, 128.0), (8.0, 1024.0))


@dataclass
class Network:
    """Overlay paths between sources and destinations, the links they share, destination capacities.

    ``path_links`` is (P, M) link indices padded with -1; ``path_metrics`` (P, 4) = rtt ms, jitter
    ms, loss %, throughput Mbit/s; ``pair_paths`` (S, D, K) path indices padded with -1;
    ``dest_cap`` (D, 3) = vCPU, RAM GB, disk GB (inf for DCs, which have no c4 rows).
    """

    n_sources: int
    n_dests: int
    dest_is_edge: np.ndarray
    dest_cap: np.ndarray
    link_cap: np.ndarray
    path_src: np.ndarray
    path_dst: np.ndarray
    path_links: np.ndarray
    path_metrics: np.ndarray
    pair_paths: np.ndarray
    link_names: list[str] = field(default_factory=list)

    @property
    def n_paths(self) -> int:
        return len(self.path_src)

    @property
    def n_links(self) -> int:
        return len(self.link_cap)

    def validate(self) -> Network:
        """Raise InvalidInputError on inconsistent arrays or negative capacities; return self."""
        P = self.n_paths
        if self.path_links.ndim != 2 or self.path_links.shape[0] != P:
            raise InvalidInputError("path_links must be a (paths, max_links) array")
        if self.path_metrics.shape != (P, 4):
            raise InvalidInputError("path_metrics must be (paths, 4): rtt, jitter, loss %, bw")
        if np.any(self.link_cap < 0) or np.any(np.isnan(self.link_cap)):
            raise InvalidInputError("link capacities must be ≥ 0")
        if np.any(self.dest_cap < 0):
            raise InvalidInputError("destination capacities must be ≥ 0")
        if np.any(self.path_metrics < 0):
            raise InvalidInputError("path metrics must be ≥ 0")
        if self.path_links.size and self.path_links.max() >= self.n_links:
            raise InvalidInputError("a path uses an unknown link index")
        if np.any((self.path_src < 0) | (self.path_src >= self.n_sources)):
            raise InvalidInputError("a path has an unknown source")
        if np.any((self.path_dst < 0) | (self.path_dst >= self.n_dests)):
            raise InvalidInputError("a path has an unknown destination")
        return self

    @classmethod
    def from_paths(
        cls,
        n_sources: int,
        paths: Sequence[tuple[int, int, Sequence[str], float, float, float, float]],
        links: dict[str, float],
        dest_caps: Sequence[tuple[float, float, float] | None],
    ) -> Network:
        """Hand-built network: paths = (src, dst, link names, rtt ms, jitter ms, loss %, bw Mbit/s).

        ``dest_caps[d]`` is (vCPU, RAM, disk) for an edge site or None for a DC (unlimited).
        """
        names = list(links)
        index = {n: i for i, n in enumerate(names)}
        n_dests = len(dest_caps)
        max_links = max((len(p[2]) for p in paths), default=1)
        path_links = -np.ones((len(paths), max(max_links, 1)), dtype=np.int64)
        per_pair: dict[tuple[int, int], list[int]] = {}
        for i, (s, d, lks, *_rest) in enumerate(paths):
            for j, name in enumerate(lks):
                if name not in index:
                    raise UnknownTopologyError(f"path {i} uses unknown link {name!r}")
                path_links[i, j] = index[name]
            per_pair.setdefault((s, d), []).append(i)
        k = max((len(v) for v in per_pair.values()), default=1)
        pair_paths = -np.ones((n_sources, n_dests, k), dtype=np.int64)
        for (s, d), ids in per_pair.items():
            if not (0 <= s < n_sources and 0 <= d < n_dests):
                raise InvalidInputError(f"path endpoint ({s}, {d}) out of range")
            pair_paths[s, d, : len(ids)] = ids
        caps = np.array([c if c is not None else (np.inf,) * 3 for c in dest_caps], float).reshape(n_dests, 3)
        return cls(
            n_sources=n_sources,
            n_dests=n_dests,
            dest_is_edge=np.array([c is not None for c in dest_caps], bool),
            dest_cap=caps,
            link_cap=np.array([links[n] for n in names], float),
            path_src=np.array([p[0] for p in paths], np.int64),
            path_dst=np.array([p[1] for p in paths], np.int64),
            path_links=path_links,
            path_metrics=np.array([p[3:7] for p in paths], float).reshape(len(paths), 4),
            pair_paths=pair_paths,
            link_names=names,
        ).validate()


@dataclass
class FlowSet:
    """Flows as parallel arrays (index = flow id).

    ``shapes``/``breakpoints`` (N, 3): demand shape code and breakpoint for rtt (ms), jitter (ms),
    loss (rate); ``bw`` Mbit/s; ``res`` (N, 3) vCPU, RAM GB, disk GB; ``profile`` Table 5 index
    (-1 for hand-built flows); ``arrival``/``duration`` seconds (zeros for a static instance).
    """

    src: np.ndarray
    shapes: np.ndarray
    breakpoints: np.ndarray
    bw: np.ndarray
    res: np.ndarray
    profile: np.ndarray
    arrival: np.ndarray
    duration: np.ndarray

    def __len__(self) -> int:
        return len(self.src)

    def validate(self, network: Network | None = None) -> FlowSet:
        """Raise InvalidInputError on negative/zero bandwidth, negative needs or unknown sources."""
        n = len(self.src)
        for name in ("bw", "profile", "arrival", "duration"):
            if len(getattr(self, name)) != n:
                raise InvalidInputError(f"flow array {name} has the wrong length")
        if self.shapes.shape != (n, 3) or self.breakpoints.shape != (n, 3) or self.res.shape != (n, 3):
            raise InvalidInputError("shapes, breakpoints and res must be (flows, 3)")
        if np.any(~(self.bw > 0)):
            raise InvalidInputError(f"flow bandwidth must be > 0 (got {self.bw[~(self.bw > 0)][:3].tolist()})")
        if np.any(self.res < 0):
            raise InvalidInputError("flow resource needs must be ≥ 0")
        if np.any(self.duration < 0):
            raise InvalidInputError("flow durations must be ≥ 0")
        active = self.shapes != IGNORE
        if np.any(~(self.breakpoints[active] > 0)):
            raise InvalidInputError("demand breakpoints must be > 0")
        if network is not None and np.any((self.src < 0) | (self.src >= network.n_sources)):
            raise InvalidInputError("a flow has an unknown source")
        return self

    @classmethod
    def from_rows(cls, rows: Sequence[dict]) -> FlowSet:
        """Hand-built flows: dicts with src, bw, optional rtt/jitter/loss = (shape name, breakpoint),
        res (vCPU, RAM, disk), profile (Table 5 index; decides pinning), arrival, duration."""
        from pce.otter.demand import SHAPES

        n = len(rows)
        shapes = np.full((n, 3), IGNORE, np.int8)
        bps = np.ones((n, 3))
        for i, r in enumerate(rows):
            for j, m in enumerate(("rtt", "jitter", "loss")):
                if r.get(m) is not None:
                    name, a = r[m]
                    if name not in SHAPES:
                        raise InvalidInputError(f"unknown demand shape {name!r} (step, linear, rational)")
                    shapes[i, j], bps[i, j] = SHAPES[name], a
        return cls(
            src=np.array([r["src"] for r in rows], np.int64),
            shapes=shapes,
            breakpoints=bps,
            bw=np.array([r["bw"] for r in rows], float),
            res=np.array([r.get("res", (0.0, 0.0, 0.0)) for r in rows], float).reshape(n, 3),
            profile=np.array([r.get("profile", -1) for r in rows], np.int64),
            arrival=np.array([r.get("arrival", 0.0) for r in rows], float),
            duration=np.array([r.get("duration", 0.0) for r in rows], float),
        ).validate()


def _sample(rng: np.random.Generator, stats: tuple[float, float, float, float], n: int, log: bool = False):
    """Draw n values with the given (min, max, avg, std): normal, or moment-matched log-normal for
    the heavy-tailed jitter/loss, clipped to [min, max]."""
    lo, hi, avg, std = stats
    if log:
        s2 = np.log1p((std / avg) ** 2)
        v = rng.lognormal(np.log(avg) - s2 / 2, np.sqrt(s2), n)
    else:
        v = rng.normal(avg, std, n)
    return np.clip(v, lo, hi)


def generate_network(
    sources: int = 8,
    dests: int = 8,
    paths: int = 8,
    *,
    seed: int = 1,
    dc_fraction: float = 0.25,
    shared_factor: float = 0.5,
    capacity_factor: float = 1.0,
    edge_factor: float = 1.0,
    scale: float = 1.0,
) -> Network:
    """Table 4 network; ``scale`` multiplies every link and edge capacity (see sim ``--scale``).

    ``capacity_factor`` multiplies every link capacity (core and, through them, access links) and
    so each path's bottleneck; ``shared_factor`` sizes access links against their paths. Both are
    *choices*: the paper gives no link capacities (see docs/performance/pce-otter.md calibration).
    ``edge_factor`` multiplies Table 4's edge-site resource ranges: taken literally (1) the six
    edge sites hold a few hundred of the ~400K flows active at 40K flows/s, yet the paper's
    edge-resource constraint changes its results by 23–50% (Fig. 11), so it is a calibrated knob.
    """
    if sources < 1 or dests < 1 or paths < 1:
        raise InvalidInputError("sources, dests and paths must be ≥ 1")
    if not (shared_factor > 0 and capacity_factor > 0 and edge_factor > 0):
        raise InvalidInputError("shared_factor, capacity_factor and edge_factor must be > 0")
    if not 0 < scale:
        raise InvalidInputError("scale must be > 0")
    if not 0 <= dc_fraction <= 1:
        raise InvalidInputError("dc_fraction must be within [0, 1]")
    rng = np.random.default_rng(seed)
    S, D, K = sources, dests, paths
    n_dc = max(1, int(round(D * dc_fraction))) if dc_fraction > 0 else 0
    is_edge = np.ones(D, bool)
    is_edge[:n_dc] = False
    cap = np.full((D, 3), np.inf)
    for j, (lo, hi) in enumerate(EDGE_CAPACITY):
        cap[is_edge, j] = rng.uniform(lo, hi, is_edge.sum()) * scale * edge_factor
    P = S * D * K
    pid = np.arange(P)
    src, dst, k = pid // (D * K), (pid // K) % D, pid % K
    thr = _sample(rng, THROUGHPUT_GBPS, P) * 1000.0 * scale * capacity_factor
    rtt = np.where(is_edge[dst], _sample(rng, RTT_EDGE_MS, P), _sample(rng, RTT_DC_MS, P))
    jit = _sample(rng, JITTER_MS, P, log=True)
    loss = np.round(_sample(rng, LOSS_PCT, P, log=True), 3)
    # links: [0, S*K) source access, [S*K, S*K+D*K) destination access, then one core link per path
    n_src_links, n_dst_links = S * K, D * K
    src_link = src * K + k
    dst_link = n_src_links + dst * K + k
    core_link = n_src_links + n_dst_links + pid
    link_cap = np.concatenate(
        [
            shared_factor * np.bincount(src_link, thr, n_src_links),
            shared_factor * np.bincount(dst_link - n_src_links, thr, n_dst_links),
            thr,
        ]
    )
    path_links = np.stack([src_link, core_link, dst_link], axis=1)
    # what a path can carry = its bottleneck link (the measured throughput metric)
    bw = link_cap[path_links].min(axis=1)
    names = (
        [f"src{s}-r{r}" for s in range(S) for r in range(K)]
        + [f"dst{d}-r{r}" for d in range(D) for r in range(K)]
        + [f"core{i}" for i in range(P)]
    )
    return Network(
        n_sources=S,
        n_dests=D,
        dest_is_edge=is_edge,
        dest_cap=cap,
        link_cap=link_cap,
        path_src=src,
        path_dst=dst,
        path_links=path_links,
        path_metrics=np.stack([rtt, jit, loss, bw], axis=1),
        pair_paths=pid.reshape(S, D, K),
        link_names=names,
    ).validate()


def generate_flows(
    network: Network,
    n: int | None = None,
    *,
    rate: float | None = None,
    duration: float | None = None,
    seed: int = 1,
    mean_duration: float = 10.0,
    std_duration: float = 10.0,
    variation: float = 0.25,
) -> FlowSet:
    """Table 4/5 flows: ``n`` static flows, or Poisson arrivals at ``rate``/s over ``duration`` s.

    Profile uniform over Table 5; shape per metric uniform over {step, linear, rational};
    breakpoints and bw uniform within ±``variation`` of the profile; durations normal(mean, std)
    truncated at 0.1 s; needs uniform over Table 4 ranges.
    """
    rng = np.random.default_rng(seed + 7919)
    if n is None:
        if rate is None or duration is None or rate <= 0 or duration <= 0:
            raise InvalidInputError("give n flows, or rate > 0 and duration > 0")
        n = int(rng.poisson(rate * duration))
        arrival = np.sort(rng.uniform(0.0, duration, n))
    else:
        if n < 0:
            raise InvalidInputError("number of flows must be ≥ 0")
        arrival = np.zeros(n)
    prof = rng.integers(0, len(PROFILES), n)
    guide = np.array([[p.rtt_ms, p.jitter_ms or 0.0, p.loss_rate] for p in PROFILES])
    has_jitter = np.array([p.jitter_ms is not None for p in PROFILES])
    thr = np.array([p.throughput_mbps for p in PROFILES])
    lo, hi = 1 - variation, 1 + variation
    shapes = rng.choice(np.array([STEP, LINEAR, RATIONAL], np.int8), size=(n, 3))
    shapes[~has_jitter[prof], 1] = IGNORE
    bps = guide[prof] * rng.uniform(lo, hi, (n, 3))
    bps[:, 1] = np.where(has_jitter[prof], bps[:, 1], 1.0)
    res = np.stack([rng.uniform(a, b, n) for a, b in FLOW_NEEDS], axis=1)
    dur = np.maximum(rng.normal(mean_duration, std_duration, n), 0.1)
    return FlowSet(
        src=rng.integers(0, network.n_sources, n),
        shapes=shapes,
        breakpoints=bps,
        bw=thr[prof] * rng.uniform(lo, hi, n),
        res=res,
        profile=prof,
        arrival=arrival,
        duration=dur,
    ).validate(network)
