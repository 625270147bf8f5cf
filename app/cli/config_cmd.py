"""``mlte config show|check``: print the effective configuration or validate a file."""
from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="show or check the configuration")
    csub = p.add_subparsers(dest="config_cmd", required=True)
    show = csub.add_parser("show", help="print the effective configuration as TOML")
    show.set_defaults(func=_show)
    check = csub.add_parser("check", help="validate a TOML config file")
    check.add_argument("file")
    check.set_defaults(func=_check)


def _show(args: argparse.Namespace) -> int:
    from app.config import dump_toml

    print(dump_toml(args.cfg), end="")
    return 0


def _check(args: argparse.Namespace) -> int:
    from app.config import load_config

    load_config(args.file)
    print(f"{args.file}: OK")
    return 0
