"""``mlte pce ...``: path computation commands; each area's subcommands live in its own module."""
from __future__ import annotations

import argparse
import importlib

#: Modules of pce/ that expose ``register(subparsers)`` for ``mlte pce <sub>``.
PCE_COMMAND_MODULES = ["pce.cli_path", "pce.cli_otter", "pce.cli_te"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pce", help="path computation: CSPF, circuit planning, OTTER LP, WAN TE LPs")
    psub = p.add_subparsers(dest="pce_cmd", metavar="PCE_COMMAND")
    psub.required = True
    for name in PCE_COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(psub)
