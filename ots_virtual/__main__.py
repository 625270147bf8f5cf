"""``python -m ots_virtual``: run one virtual OTS agent until SIGINT/SIGTERM (docs/ots.md, "CLI")."""
from __future__ import annotations

import argparse
import logging
import math
import signal
import sys
import threading

from ots_virtual.agent import ECHO_INTERVAL, ECHO_TIMEOUT, READ_TIMEOUT, OtsAgent, check_keepalive
from ots_virtual.granularity import PortSpecError, parse_ports
from ots_virtual.upstream import TLS_NAME, TlsFiles, UpstreamConfigError, parse_targets

DEFAULT_CONTROLLER = "127.0.0.1:6653"


def _controllers(text: str) -> str:
    """argparse type: check one ``--controller`` value (it may list several, comma-separated)."""
    try:
        parse_targets([text])
    except UpstreamConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def tls_files(args: argparse.Namespace) -> TlsFiles | None:
    """The TLS files from ``--tls DIR`` and/or ``--ssl-ca/--ssl-cert/--ssl-key`` (an explicit file
    wins over the directory's); None if none is given. UpstreamConfigError if some are missing."""
    base = TlsFiles.from_dir(args.tls, args.tls_name) if args.tls else None
    ca = args.ssl_ca or (base.ca if base else None)
    cert = args.ssl_cert or (base.cert if base else None)
    key = args.ssl_key or (base.key if base else None)
    if not (ca or cert or key):
        return None
    missing = [opt for opt, v in (("--ssl-ca", ca), ("--ssl-cert", cert), ("--ssl-key", key)) if not v]
    if missing:
        raise UpstreamConfigError(f"TLS needs a CA, a certificate and a key: {', '.join(missing)} missing")
    assert ca and cert and key
    return TlsFiles(ca, cert, key)


def _listen_port(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) < 65536:
        raise argparse.ArgumentTypeError(f"listen port must be 0..65535 (0 = any free port), got {text!r}")
    return int(text)


def _seconds(text: str) -> float:
    """argparse type: a finite number >= 0 (``nan``/``inf``/negatives are usage errors)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def _dpid(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"dpid must be an integer (e.g. 0x0f01), got {text!r}") from None
    if not 0 <= value < 1 << 64:
        raise argparse.ArgumentTypeError("dpid must fit in 64 bits")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ots_virtual",
                                description="Virtual Open Transport Switch: OpenFlow 1.0 over an OVS bridge.")
    p.add_argument("--bridge", required=True, help="existing OVS bridge to own (userspace datapath)")
    p.add_argument("--dpid", required=True, type=_dpid, help="datapath id reported to the controller")
    p.add_argument("--ports", required=True,
                   help="virtual ports: <of_port>:<granularity>,... e.g. 1:ODU2,2:ODU2,6:ODU0")
    p.add_argument("--controller", action="append", type=_controllers, metavar="[tcp:|ssl:]HOST:PORT",
                   help=f"a controller to connect to; repeat it (or separate with commas) for several, "
                        f"each gets its own session (default {DEFAULT_CONTROLLER})")
    p.add_argument("--tls", metavar="DIR", default="",
                   help=f"TLS files of `mlte pki init DIR`: DIR/ca-cert.pem, DIR/NAME-cert.pem, DIR/NAME-key.pem "
                        f"(NAME from --tls-name, default {TLS_NAME})")
    p.add_argument("--tls-name", default=TLS_NAME, metavar="NAME", help="certificate name inside --tls DIR")
    p.add_argument("--ssl-ca", default="", metavar="FILE", help="CA certificate that signs the controllers (PEM)")
    p.add_argument("--ssl-cert", default="", metavar="FILE", help="the agent's client certificate (PEM)")
    p.add_argument("--ssl-key", default="", metavar="FILE", help="the agent's private key (PEM)")
    p.add_argument("--delay-min", type=_seconds, default=0.150, help="provisioning delay lower bound, s (default 0.150)")
    p.add_argument("--delay-max", type=_seconds, default=0.220, help="provisioning delay upper bound, s (default 0.220)")
    p.add_argument("--unit-mbps", type=_seconds, default=1.0, help="Mbit/s per bandwidth unit (default 1; ODU2 = 10 units)")
    p.add_argument("--listen-port", type=_listen_port, default=0,
                   help="127.0.0.1 port the bridge connects to (default: any free port)")
    p.add_argument("--echo-interval", type=_seconds, default=ECHO_INTERVAL,
                   help=f"keepalive: seconds between ECHO_REQUESTs to the controller, 0 = off (default {ECHO_INTERVAL:g})")
    p.add_argument("--echo-timeout", type=_seconds, default=ECHO_TIMEOUT,
                   help=f"keepalive: reconnect after this many seconds without any message from the controller "
                        f"(default {ECHO_TIMEOUT:g})")
    p.add_argument("--read-timeout", type=_seconds, default=READ_TIMEOUT,
                   help=f"close the controller session when a message is still incomplete this many seconds "
                        f"after its first byte (default {READ_TIMEOUT:g})")
    p.add_argument("--log", default="", help="log file (default: stderr)")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.log:
        try:
            open(args.log, "a").close()
        except OSError as exc:
            print(f"ots_virtual: error: --log {args.log}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        filename=args.log or None,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        ports = parse_ports(args.ports)
        if not 0 <= args.delay_min <= args.delay_max:
            raise PortSpecError("need 0 <= --delay-min <= --delay-max")
        if args.unit_mbps <= 0:
            raise PortSpecError("--unit-mbps must be > 0")
        if args.read_timeout <= 0:
            raise PortSpecError("--read-timeout must be > 0")
        try:
            check_keepalive(args.echo_interval, args.echo_timeout)
        except ValueError as exc:
            raise PortSpecError(f"--echo-interval/--echo-timeout: {exc}") from None
        controllers = parse_targets(args.controller or [DEFAULT_CONTROLLER])
        files = tls_files(args)
        if files is not None and not any(c.tls for c in controllers):
            raise UpstreamConfigError("TLS files given but no ssl:HOST:PORT controller")
        tls = files.context() if files is not None else None
        agent = OtsAgent(args.bridge, args.dpid, ports, controllers, args.delay_min, args.delay_max,
                         args.unit_mbps, listen_port=args.listen_port, echo_interval=args.echo_interval,
                         echo_timeout=args.echo_timeout, read_timeout=args.read_timeout, tls=tls)
        agent.start()
    except Exception as exc:
        if getattr(exc, "user_error", False):
            print(f"ots_virtual: error: {exc}", file=sys.stderr)
            return 2
        raise
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    logging.getLogger("ots_virtual").info("OTS %s (dpid %#x) up; OVS connects to 127.0.0.1:%d; controllers %s",
                                          args.bridge, args.dpid, agent.ovs_port,
                                          ", ".join(str(c) for c in agent.controllers))
    done.wait()
    agent.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
