"""``mlte pki init DIR`` / ``mlte pki issue DIR NAME``: the CA and certificates for OpenFlow over TLS."""
from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pki", help="make a CA and certificates for OpenFlow over TLS ([controller] tls)")
    psub = p.add_subparsers(dest="pki_cmd", required=True, metavar="{init,issue}")
    init = psub.add_parser("init", help="make a CA in DIR and sign controller-* and switch-* certificates with it")
    init.add_argument("dir", help="directory for the PEM files (created; an existing CA in it is never overwritten)")
    init.add_argument("--server-name", action="append", default=[], metavar="NAME",
                      help="DNS name or IP address the controller certificate is valid for (repeatable; "
                           "default: localhost, 127.0.0.1, ::1 and this host's name)")
    init.add_argument("--days", type=int, default=825, help="validity of the signed certificates (default 825)")
    init.set_defaults(func=_init)
    issue = psub.add_parser("issue", help="sign one more certificate NAME-cert.pem / NAME-key.pem with DIR's CA")
    issue.add_argument("dir", help="a directory made by `mlte pki init`")
    issue.add_argument("name", help="file name stem: letters, digits, '_', '.', '-'")
    issue.add_argument("--server", action="store_true",
                       help="a server certificate (another controller) rather than a client one (a switch, an agent)")
    issue.add_argument("--server-name", action="append", default=[], metavar="NAME",
                       help="with --server: DNS name or IP address it is valid for (repeatable)")
    issue.add_argument("--days", type=int, default=825, help="validity (default 825)")
    issue.set_defaults(func=_issue)


def _init(args: argparse.Namespace) -> int:
    from app import pki

    made = pki.init(args.dir, server_names=args.server_name or None, days=args.days)
    for name, files in made.items():
        print(f"{name}: {files.cert} {files.key}")
    return 0


def _issue(args: argparse.Namespace) -> int:
    from app import pki

    if args.server_name and not args.server:
        raise pki.PkiError("--server-name needs --server")
    made = pki.issue(args.dir, args.name, server=args.server, names=args.server_name or None, days=args.days)
    print(f"{args.name}: {made.cert} {made.key}")
    return 0
