"""``mlte topology show|draw|check-vendor-file``: look at a multi-layer graph from any source.

Sources: a graph JSON file (``--from``), a static vendor file (``--vendor-file``), a lab spec
(``--spec fig2``) or the running controller's ``GET /topology`` (``--controller``, the default).
Several sources are merged (controller, then --from, then --spec, then the vendor file: first wins)
and the conflicts are printed on stderr.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from app.errors import MlteError


class ControllerUnreachable(MlteError):
    """The controller's control API did not answer ``GET /topology``."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("topology", help="show, draw and check multi-layer topologies")
    tsub = p.add_subparsers(dest="topology_cmd", metavar="TOPOLOGY_COMMAND")
    tsub.required = True

    show = tsub.add_parser("show", help="print the multi-layer graph (text or JSON)")
    _add_sources(show)
    show.add_argument("--json", action="store_true", help="print the graph as JSON (docs/graph-model.md)")
    show.set_defaults(func=_show)

    draw = tsub.add_parser("draw", help="draw a graph to a PNG (packet layer above, optical below)")
    draw.add_argument("file", nargs="?", help="graph JSON file (or a vendor file .yaml/.json)")
    _add_sources(draw)
    draw.add_argument("-o", "--output", required=True, help="PNG file to write")
    draw.add_argument("--title", help="title drawn above the graph")
    draw.add_argument("--potential", choices=["auto", "show", "hide"], default="auto",
                      help="potential XCONs: faint lines (show), none (hide), show when few (auto)")
    draw.set_defaults(func=_draw)

    check = tsub.add_parser("check-vendor-file", help="validate a static vendor topology file")
    check.add_argument("file")
    check.set_defaults(func=_check)


def _add_sources(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from", dest="from_file", metavar="FILE.json", help="a graph JSON file (`show --json` output)")
    p.add_argument("--vendor-file", metavar="FILE", help="a static vendor topology file (YAML or JSON)")
    p.add_argument("--spec", metavar="NAME", help="a lab spec: fig2, mesh-<packet>x<ots>, topohub:<key>")
    p.add_argument("--controller", metavar="URL", nargs="?", const="",
                   help="the controller API (default http://127.0.0.1:<[controller] api_port>)")


def _controller_url(args: argparse.Namespace) -> str:
    if args.controller:
        return args.controller.rstrip("/")
    port = args.cfg.get("controller", {}).get("api_port", 8181)
    return f"http://127.0.0.1:{port}"


def fetch_controller_graph(url: str, timeout: float = 10.0, ctl: dict | None = None) -> tuple[Any, list[str]]:
    """``GET <url>/topology`` -> (MultiLayerGraph, problems the controller reported); ``ctl``: the
    ``[controller]`` settings naming the API's token file (and whether it needs one)."""
    from app.controller.client import ControlApiError, ControllerClient, CredentialError
    from topology.graph import MultiLayerGraph

    ctl = ctl or {}
    try:
        data = ControllerClient(url=url, timeout=timeout, token_config=ctl.get("api_token_file", ""),
                                auth=ctl.get("api_auth", True)).topology()
    except ControlApiError as exc:
        running = exc.status == 0 and not isinstance(exc, CredentialError)
        hint = "; is `mlte controller` running? (or use --from/--vendor-file/--spec)" if running else ""
        raise ControllerUnreachable(f"{exc}{hint}") from None
    return MultiLayerGraph.from_dict(data), [str(p) for p in data.get("problems", [])]


def load_graph_file(path: str) -> Any:
    """A graph JSON file, or a vendor file (``.yaml``/``.yml``, or JSON with ``version`` and ``ots``)."""
    from topology.errors import TopologyError
    from topology.graph import MultiLayerGraph
    from topology.vendor_file import load_vendor_graph

    p = Path(path)
    if p.suffix.lower() in (".yaml", ".yml"):
        return load_vendor_graph(p)
    try:
        text = p.read_text()
    except OSError as exc:
        raise TopologyError(f"{p}: cannot read: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TopologyError(f"{p}: invalid JSON: {exc}") from None
    if isinstance(data, dict) and "version" in data and "ots" in data:
        return load_vendor_graph(p)
    try:
        return MultiLayerGraph.from_dict(data)
    except TopologyError as exc:
        raise TopologyError(f"{p}: {exc}") from None


def collect_graph(args: argparse.Namespace, extra_file: str | None = None) -> Any:
    """The graph asked for on the command line (merging several sources; conflicts to stderr)."""
    from topology.merge import merge
    from topology.spec import spec_by_name, spec_to_graph
    from topology.vendor_file import load_vendor_graph

    graphs, names = [], []
    if args.controller is not None or not (args.from_file or args.vendor_file or args.spec or extra_file):
        url = _controller_url(args)
        g, problems = fetch_controller_graph(url, ctl=args.cfg.get("controller"))
        for problem in problems:
            print(f"controller: {problem}", file=sys.stderr)
        graphs.append(g)
        names.append("controller")
    for path in (extra_file, args.from_file):
        if path:
            graphs.append(load_graph_file(path))
            names.append(path)
    if args.spec:
        graphs.append(spec_to_graph(spec_by_name(args.spec)))
        names.append(f"spec {args.spec}")
    if args.vendor_file:
        graphs.append(load_vendor_graph(args.vendor_file))
        names.append(args.vendor_file)
    if len(graphs) == 1:
        return graphs[0]
    result = merge(*graphs, names=names)
    for c in result.conflicts:
        print(f"conflict: {c}", file=sys.stderr)
    return result.graph


def _show(args: argparse.Namespace) -> int:
    from topology.draw import format_graph

    g = collect_graph(args)
    if args.json:
        print(g.to_json(indent=2))
    else:
        print(format_graph(g), end="")
    return 0


def _draw(args: argparse.Namespace) -> int:
    from topology.draw import draw_png

    g = collect_graph(args, extra_file=args.file)
    show = {"auto": None, "show": True, "hide": False}[args.potential]
    out = draw_png(g, args.output, title=args.title, show_potential=show)
    print(f"wrote {out}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from topology.vendor_file import read_vendor_file

    doc = read_vendor_file(args.file)
    n_ports = sum(len(o["ports"]) for o in doc["ots"])
    print(f"{args.file}: OK: {len(doc['ots'])} OTS, {n_ports} ports, {len(doc['fibres'])} fibres, "
          f"{len(doc['adaptations'])} adaptations, {len(doc['packet_switches'])} packet switches")
    return 0
