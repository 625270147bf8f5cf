"""``mlte controller``: run the os-ken controller (OF1.0 OTS + OF1.3 packet switches) and its API."""
from __future__ import annotations

import argparse
import json


def tcp_port(text: str) -> int:
    """argparse type: a TCP port number (a bad one is a one-line usage error, not a traceback later)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"port {port} out of range 1..65535")
    return port


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("controller", help="run the OpenFlow controller and its local control API")
    p.add_argument("--listen-host", help="OpenFlow listen address (default [controller] listen_host)")
    p.add_argument("--of-port", type=tcp_port, help="OpenFlow listen port (default [controller] listen_port, 6653)")
    p.add_argument("--api-port", type=tcp_port, help="control API port (default [controller] api_port, 8181)")
    p.add_argument("--static-file", help="static vendor topology file merged into the graph")
    p.add_argument("--names", help='JSON file {"0xa1": "A", "00:00:00:00:00:01": "h1", ...} naming datapaths (dpid keys) and hosts (MAC keys)')
    p.add_argument("--db-url", help="database for the capability store, topology snapshots and circuits the web service reads, and monitor series (default [db] url)")
    p.add_argument("--app", action="append", default=[], metavar="MODULE",
                   help="also load this os-ken app module (repeatable), e.g. a monitor app")
    p.add_argument("--log-file", help="also log handler exceptions to this file")
    p.add_argument("--state-file", help="keep what the optical scan learnt in this JSON file across restarts "
                                        "(default [controller] state_file; created on the first scan)")
    p.add_argument("--api-token-file", help="the control API's bearer token, made 0600 on the first start "
                                            "(default $MLTE_API_TOKEN_FILE, else [controller] api_token_file)")
    p.add_argument("--tls-dir", help="OpenFlow over TLS only, with this `mlte pki init` directory's CA and "
                                     "controller certificate (sets [controller] tls = true and tls_dir)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from app.errors import ConfigError

    cfg = args.cfg
    ctl = cfg["controller"]
    if args.listen_host:
        ctl["listen_host"] = args.listen_host
    if args.of_port is not None:
        ctl["listen_port"] = args.of_port
    if args.api_port is not None:
        ctl["api_port"] = args.api_port
    if args.static_file:
        ctl["static_file"] = args.static_file
    if args.log_file:
        ctl["log_file"] = args.log_file
    if args.db_url:
        cfg["db"]["url"] = args.db_url
    if args.state_file:
        ctl["state_file"] = args.state_file
    if args.tls_dir:
        ctl["tls"], ctl["tls_dir"] = True, args.tls_dir
    _check_settings(args, cfg)
    _check_credential(args, ctl)
    if ctl["state_file"]:
        from app.controller.state_file import StateFileError, load

        try:
            load(ctl["state_file"])  # a bad file is a one-line error now, not a traceback inside os-ken
        except StateFileError as exc:
            raise ConfigError(f"state file: {exc}") from None
        from app.te.store import StoreError, open_store

        try:
            open_store(ctl["state_file"])  # the TE loop's records beside it (docs/te-loop.md), same check
        except StoreError as exc:
            raise ConfigError(f"TE state file: {exc}") from None
    from app.controller.model import split_names

    names: dict[int, str] = {}
    host_names: dict[str, str] = {}
    if args.names:
        try:
            with open(args.names) as f:
                names, host_names = split_names(json.load(f))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--names {args.names}: {exc}") from None
    from app.controller.launcher import run

    run(cfg, names, args.app, host_names)
    return 0


def _check_settings(args: argparse.Namespace, cfg: dict) -> None:
    """Ports, database and static topology file, before os-ken starts: a bad one is one line naming
    the setting, not a traceback from inside an app (whether the ports are free the launcher checks)."""
    from app.cli.startup import check_port, open_database
    from app.errors import ConfigError

    ctl = cfg["controller"]
    check_port(ctl["listen_port"], "--of-port" if args.of_port is not None else "[controller] listen_port")
    check_port(ctl["api_port"], "--api-port" if args.api_port is not None else "[controller] api_port")
    if ctl["listen_port"] == ctl["api_port"] and ctl["listen_host"] == ctl["api_host"]:
        raise ConfigError(f"--of-port/--api-port: OpenFlow and the control API both on port {ctl['api_port']}")
    if cfg["db"]["url"]:
        from app.controller import db_writer

        # the controller's migration, once, here: its db writer thread then opens the one engine
        open_database(cfg["db"]["url"], "--db-url" if args.db_url else "[db] url").dispose()
        db_writer.migrated(cfg["db"]["url"])
    if ctl["static_file"]:
        from topology.errors import TopologyError
        from topology.vendor_file import load_vendor_graph

        try:
            load_vendor_graph(ctl["static_file"])
        except TopologyError as exc:
            setting = "--static-file" if args.static_file else "[controller] static_file"
            raise ConfigError(f"{setting}: {exc}") from None


def _check_credential(args: argparse.Namespace, ctl: dict) -> None:
    """Make (or check) the control API's token file now: a file others can read is one line naming it
    and the setting, not a traceback from inside os-ken; the API then reads the file it names."""
    from app.controller import api_token
    from app.errors import ConfigError

    if not ctl["api_auth"]:
        return
    where = api_token.resolve(args.api_token_file, ctl["api_token_file"])
    try:
        api_token.load_or_create(where)
    except api_token.TokenFileError as exc:
        raise ConfigError(str(exc)) from None
    ctl["api_token_file"] = str(where.path)
