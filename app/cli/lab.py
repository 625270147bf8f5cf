"""``mlte lab NAME``: run a Mininet lab (the Fig. 2 testbed or a generated one) with our controller.

``--discover`` runs discovery (LLDP + optical scan, merged with the static optical-domain file),
prints the multi-layer graph, writes it as JSON and PNG, and cleans everything up; without it the
lab runs until Ctrl-C (the control API stays up for the monitor, the web service or curl).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import signal
import sys
import tempfile
import time
from pathlib import Path

from app.cli.controller import tcp_port
from app.errors import MlteError


class LabError(MlteError):
    """The lab could not be run (not root, no OVS, a switch did not connect, ...)."""


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (``nan``, ``inf`` and negatives are usage errors)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def _int_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be >= {low}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0 (a seed)."""
    return _int_at_least(text, 0)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lab", help="run a Mininet lab with the controller (needs root and OVS)",
                       description="`mlte lab list` names the experiment labs, `mlte lab run NAME --out DIR "
                                   "[--quick]` runs one; `mlte lab TOPOLOGY [--discover]` starts a testbed.")
    p.add_argument("name", help="list | run | testbed (= fig2, the paper's Fig. 2), "
                                "mesh-<packet>x<ots>[-d<deg>][-s<seed>], topohub:<key>")
    p.add_argument("lab", nargs="?", help="with `run`: the lab to run (see `mlte lab list`)")
    p.add_argument("--quick", action="store_true", help="with `run`: the CI-sized run (about a minute)")
    p.add_argument("--runs", type=positive_int, help="with `run` (elastic-offload): repeat the measurement N times "
                                                      "and report the medians")
    p.add_argument("--seeds", type=positive_int, help="with `run`: repetitions with different random seeds "
                                                       "(labs that take seeds, e.g. multihoming; default theirs)")
    p.add_argument("--seed", type=non_negative_int, help="with `run`: the random seed of labs that take one "
                                                          "(elastic-offload, big-vs-small, path-change, overlay; "
                                                          "multihoming: the first of its --seeds; default theirs)")
    p.add_argument("--counter-refresh-ms", type=positive_int,
                   help="with `run` (elastic-offload): OVS other_config:max-revalidator (ms) during the lab: how often "
                        "userspace OVS refreshes rule counters (OVS default 500)")
    p.add_argument("--min-gain-s", type=non_negative_float,
                   help="with `run` (elastic-offload): the TE loop's [te] min_gain_s (the lab's default 0.3)")
    p.add_argument("--young-horizon-s", type=non_negative_float,
                   help="with `run` (elastic-offload): the TE loop's [te] young_horizon_s (default 0 = off: "
                        "a young elephant is judged on its counted bytes alone)")
    p.add_argument("--te", choices=["on", "off"], help="with `run` (elastic-offload): `off` runs only the "
                                                        "baseline with the TE loop off")
    p.add_argument("--placement", choices=["otter", "joint", "cspf", "all"],
                   help="with `run` (placement-compare): the [te] placement policy to run, or all of them one after "
                        "the other with the same seed (default all)")
    p.add_argument("--demo", action="store_true", help="with `run` (elastic-offload): `make demo` — also the web "
                                                       "service, every event of the loop live, one short run")
    p.add_argument("--topology", help="with `run`: the testbed of fibre-cut (fig2 | mesh6, default fig2) or "
                                             "of wan (topohub:<key>, default topohub:sndlib/abilene)")
    p.add_argument("--paper-sizes", action="store_true", help="with `run` (big-vs-small): the paper's U(512 KB, "
                                                              "4 MB) small transfers, 100-s runs (about 7 min)")
    p.add_argument("--discover", action="store_true",
                   help="discover the topology, print it, write JSON + PNG, then clean up and exit")
    p.add_argument("--out", default="lab-out", help="output directory (default %(default)s)")
    static = p.add_mutually_exclusive_group()
    static.add_argument("--static-file", help="static vendor topology file (default: the lab's optical domain, "
                                              "fibres only, written to OUT/optical-domain.json)")
    static.add_argument("--no-static", action="store_true", help="use no static file (fibres stay unknown)")
    p.add_argument("--scan-all", action="store_true", help="probe every free OTS port, even with known far ends")
    p.add_argument("--circuit", choices=["initial", "bypass", "direct", "offload"],
                   help="(testbed, with --discover) after discovery, provision this circuit and show the packet "
                        "links it makes")
    p.add_argument("--unit-mbps", type=positive_float,
                   help="lab scale: Mbit/s per bandwidth unit (default [ots] unit_mbps)")
    p.add_argument("--no-shaping", action="store_true", help="no HTB link shaping")
    p.add_argument("--of-port", type=tcp_port, help="OpenFlow port (default: a free one)")
    p.add_argument("--api-port", type=tcp_port, help="control API port (default: a free one)")
    p.add_argument("--timeout", type=positive_float, default=120.0, help="seconds allowed for each discovery step")
    p.set_defaults(func=_run)


def _raise_interrupt(signum, frame):  # SIGTERM/SIGHUP clean up like Ctrl-C
    # once: a second signal (or a SIGHUP sent to the process group while Mininet stops its nodes) must
    # not cut the clean-up short (a 50-PoP lab stopped by SIGTERM once kept its 100 bridges)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt


def _list() -> int:
    from mininet_labs.registry import LABS

    width = max(len(n) for n in LABS)
    for lab in LABS.values():
        print(f"{lab.name:<{width}}  {lab.summary} [{lab.paper}]")
    return 0


def _run_lab(args: argparse.Namespace) -> int:
    from mininet_labs.registry import LABS

    if not args.lab:
        raise LabError(f"lab run: which lab? one of {', '.join(LABS)}")
    lab = LABS.get(args.lab)
    if lab is None:
        raise LabError(f"unknown lab {args.lab!r}; `mlte lab list` names them ({', '.join(LABS)})")
    runner = lab.runner()
    options = _lab_options(args, lab.name, runner)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_interrupt)
    out = Path(args.out)
    print(f"lab {lab.name}{' (quick)' if args.quick else ''}: {lab.summary}; results in {out}", flush=True)
    try:
        runner(out, quick=args.quick, progress=lambda line: print(line, flush=True), **options)
    except KeyboardInterrupt:
        print("\ninterrupted: the lab cleaned up", file=sys.stderr)
        return 130
    except TimeoutError as exc:
        raise LabError(f"{lab.name}: {exc}") from None
    return 0


def _lab_options(args: argparse.Namespace, name: str, runner) -> dict:
    """The extra options given (``--runs``, ``--seeds``, ``--seed``, ``--te``, ``--demo``, ``--placement``,
    ``--paper-sizes``, ``--topology``), if the lab takes them."""
    import inspect

    given = {"runs": args.runs, "seeds": args.seeds, "seed": args.seed, "te": None if args.te is None else args.te == "on",
             "demo": args.demo or None, "placement": args.placement, "paper_sizes": args.paper_sizes or None,
             "topology": args.topology, "counter_refresh_ms": getattr(args, "counter_refresh_ms", None),
             "min_gain_s": getattr(args, "min_gain_s", None),
             "young_horizon_s": getattr(args, "young_horizon_s", None)}
    given = {k: v for k, v in given.items() if v is not None}
    takes = inspect.signature(runner).parameters
    refused = [k for k in given if k not in takes]
    if refused:
        raise LabError(f"lab {name} does not take {', '.join('--' + k.replace('_', '-') for k in refused)}")
    topo = given.get("topology")
    if topo is not None and (topo not in ("fig2", "mesh6") if name != "wan" else not topo.startswith("topohub:")):
        raise LabError(f"lab {name}: --topology {topo!r}: expected " + ("topohub:<key>" if name == "wan" else "fig2 or mesh6"))
    if given.get("paper_sizes") and args.quick:
        raise LabError("--paper-sizes runs the paper's transfer sizes for 100 s per C: not a --quick size")
    if given.get("demo") and given.get("te") is False:
        raise LabError("--demo shows the TE loop at work: it cannot run with --te off")
    return given


def _run(args: argparse.Namespace) -> int:
    import os
    import shutil

    if args.name == "list":
        return _list()
    if args.lab is not None and args.name != "run":
        raise LabError(f"unexpected argument {args.lab!r} (only `mlte lab run NAME` takes a second name)")
    if args.circuit and not args.discover:
        raise LabError("--circuit is provisioned after discovery: add --discover "
                       f"(mlte lab {args.name} --discover --circuit {args.circuit})")
    if os.geteuid() != 0:
        raise LabError("mlte lab needs root (Mininet and OVS); run it with sudo")
    if shutil.which("ovs-vsctl") is None:
        raise LabError("Open vSwitch is not installed (run `make bootstrap`)")
    from mininet_labs.ovs import OvsUnavailable, ensure_ovs
    try:
        ensure_ovs(log=lambda m: print(m, flush=True))
    except OvsUnavailable as exc:
        raise LabError(str(exc)) from None
    if args.name == "run":
        return _run_lab(args)
    from mininet_labs.netlock import net_lock  # the machine-wide lock every network builder holds
    from mininet_labs.session import LabSession  # (its testbed import puts the project root on sys.path)
    from topology.spec import spec_by_name, spec_to_vendor_file
    from topology.vendor_file import load_vendor_graph, write_vendor_file

    unit = args.unit_mbps or args.cfg["ots"]["unit_mbps"]
    spec = spec_by_name("fig2" if args.name == "testbed" else args.name, unit)
    if args.circuit and spec.name != "fig2":
        raise LabError("--circuit names circuits of the testbed (fig2) only")
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LabError(f"--out {out}: cannot create it ({exc.strerror or exc})") from None
    static = args.static_file
    if static:
        load_vendor_graph(static)  # a bad file fails here in one line, not later inside the controller
        static = str(Path(static).resolve())  # the controller runs in the project root, not here
    elif not args.no_static:
        doc = spec_to_vendor_file(spec, setup_time=sum(_delays(args)) / 2)
        doc["adaptations"] = []  # the scan must find those; the operator's file gives the fibres
        doc["packet_switches"] = []
        static = str((out / "optical-domain.json").resolve())
        write_vendor_file(doc, static)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_interrupt)
    workdir = tempfile.mkdtemp(prefix="mlte-lab-")
    print(f"lab {spec.name}: {len(spec.switches)} packet switches, {len(spec.ots)} OTS, {len(spec.hosts)} hosts; "
          f"logs in {workdir}", flush=True)
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(net_lock(timeout=args.timeout * 5))
        except TimeoutError as exc:
            raise LabError(f"another lab or network test is running: {exc}") from None
        session = LabSession(spec, workdir, delay=_delays(args), shaping=not args.no_shaping,
                             static_file=static, of_port=args.of_port, api_port=args.api_port)
        try:
            session.start(timeout=args.timeout)
            print(f"controller API http://127.0.0.1:{session.api_port} (OpenFlow on {session.of_port}; "
                  f"API token in {session.token_file}); "
                  f"all {len(spec.switches) + len(spec.ots)} datapaths connected", flush=True)
            if args.discover:
                return _discover(args, spec, session, out)
            print("lab running; Ctrl-C to stop", flush=True)
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            print("\ninterrupted: cleaning up", file=sys.stderr)
            return 130
        except TimeoutError as exc:  # a switch, link or the API did not come in time
            raise LabError(f"{exc} (logs in {workdir})") from None
        finally:
            # a second Ctrl-C / SIGTERM (e.g. `timeout` signals the whole process group) must not
            # interrupt the cleanup half-way
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_IGN)
            session.stop()
            print("lab stopped: processes, bridges and interfaces removed", flush=True)


def _delays(args: argparse.Namespace) -> tuple[float, float]:
    ots = args.cfg["ots"]
    return float(ots["provision_delay_min"]), float(ots["provision_delay_max"])


def _discover(args: argparse.Namespace, spec, session, out: Path) -> int:
    from mininet_labs.circuits import FIG2_CIRCUIT_LINKS, FIG2_CIRCUITS, directed
    from topology.compare import graph_diff, with_known_hosts
    from topology.draw import draw_png, format_graph
    from topology.graph import EDGE_KINDS, MultiLayerGraph
    from topology.spec import spec_to_graph

    t0 = time.monotonic()
    session.wait_links(timeout=args.timeout)
    n_links = len(spec.links_of_kind("packet"))
    why = "" if n_links else " (none expected: the packet switches meet only through circuits)"
    print(f"LLDP: {n_links} packet link(s) discovered in {time.monotonic() - t0:.1f}s{why}", flush=True)
    scan = session.client.scan(all_ports=args.scan_all, timeout=args.timeout)
    print(f"optical scan: {scan['probes']} probe XCON(s) in {scan.get('rounds', scan['probes'])} round(s), "
          f"{scan['seconds']:.1f}s, "
          f"{len(scan['adaptations'])} packet-optical adjacenc(ies) found, "
          f"{len(scan['ambiguous'])} ambiguous, probe XCONs left: {len(scan['leftover_xcons'])}", flush=True)
    (out / "scan.json").write_text(json.dumps(scan, indent=2, sort_keys=True))
    data = session.client.topology()
    problems = data.pop("problems", [])
    graph = MultiLayerGraph.from_dict(data)
    # hosts appear once they sent something; access edges are as wide as the port reports (veth: 10 Gbit/s)
    expected = with_known_hosts(spec_to_graph(spec, setup_time=sum(_delays(args)) / 2), graph)
    edge_kinds = [k for k in EDGE_KINDS if not (args.no_static and k == "optical")]  # no file: no fibres
    diff = graph_diff(graph, expected, edge_kinds=edge_kinds,
                      ignore_attrs=("source", "name", "access.capacity", "host.ip"))
    if args.circuit:
        hops = FIG2_CIRCUITS[args.circuit]
        t1 = time.monotonic()
        session.client.circuit(hops)
        session.wait_links(directed(FIG2_CIRCUIT_LINKS[args.circuit]), timeout=args.timeout)
        print(f"circuit {args.circuit}: {len(hops)} XCON(s) applied, packet links "
              f"{', '.join(f'{a}:{ap}-{b}:{bp}' for a, ap, b, bp in FIG2_CIRCUIT_LINKS[args.circuit])} "
              f"seen by LLDP after {time.monotonic() - t1:.2f}s", flush=True)
        data = session.client.topology()
        problems += data.pop("problems", [])
        graph = MultiLayerGraph.from_dict(data)
    print()
    print(format_graph(graph))
    print()
    for p in problems:
        print(f"warning: {p}")
    if diff:
        print(f"discovered graph differs from the {spec.name} spec in {len(diff)} place(s):")
        for line in diff[:40]:
            print(f"  {line}")
    else:
        what = "adaptations, potential XCONs; no fibres: --no-static" if args.no_static else \
            "adaptations, fibres, potential XCONs"
        print(f"discovered graph = the {spec.name} spec (nodes, ports, {what})")
    (out / "topology.json").write_text(graph.to_json(indent=2))
    title = f"{spec.name}: discovered multi-layer topology" + (f" + circuit {args.circuit}" if args.circuit else "")
    png = draw_png(graph, out / "topology.png", title=title)
    print(f"wrote {out / 'topology.json'}, {png}, {out / 'scan.json'}")
    errors = session.controller_errors()
    if errors:
        print("controller handler errors:\n" + errors, file=sys.stderr)
        return 1
    return 0 if not diff and not scan["leftover_xcons"] else 1
