"""Entry point of the ``mlte`` command.

Each subcommand lives in its own module (``app.cli.<name>``) exposing ``register(subparsers)``;
heavy imports stay inside the handlers so ``mlte --help`` is fast.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import sys

#: Subcommand modules, in the order they appear in ``mlte --help``.
COMMAND_MODULES = ["controller", "lab", "plans", "topology", "pce", "monitor", "web", "config_cmd", "pki"]


def _version() -> str:
    """The installed distribution's version (setup.py is its one source)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"mlte {version('mlte')}"
    except PackageNotFoundError:
        return "mlte (not installed: run `pip install -e .` for a version)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mlte",
        description="Multi-layer (packet + optical) SDN traffic engineering.",
    )
    parser.add_argument("-c", "--config", help="TOML config file (default: built-in defaults, see `mlte config show`)")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"app.cli.{name}")
        except ModuleNotFoundError as exc:  # a subcommand not built yet must not break the others
            if exc.name != f"app.cli.{name}":
                raise
            continue
        module.register(sub)
    return parser


def _deepest(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)parser of the command given, e.g. ``mlte pce path``'s."""
    while True:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        name = getattr(args, sub.dest, None) if sub is not None else None
        if sub is None or name not in sub.choices:
            return parser
        parser = sub.choices[name]


def _optional_subcommands(parser: argparse.ArgumentParser) -> None:
    """Make every required subcommand level optional for argparse, marked ``mlte_required`` so
    :func:`main` reports a missing one itself: a required level makes argparse stop at "the following
    arguments are required" before it looks at the rest, so `mlte --bogus` never said "unknown option"."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            if action.required:
                action.required = False
                action.mlte_required = True  # type: ignore[attr-defined]
            for child in set(action.choices.values()):
                _optional_subcommands(child)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    _optional_subcommands(parser)
    args, extra = parser.parse_known_args(argv)
    deepest = _deepest(parser, args)
    missing = next((a for a in deepest._actions if isinstance(a, argparse._SubParsersAction)
                    and getattr(a, "mlte_required", False)), None)
    if missing is not None:  # the command stops before its required subcommand
        if extra:
            deepest.error(f"unknown option {extra[0]} (see `{deepest.prog} --help`)")
        deepest.error(f"the following arguments are required: {missing.metavar or missing.dest} "
                      f"(see `{deepest.prog} --help`)")
    if extra:  # reported with the subcommand's usage, not the top level's
        deepest.error(f"unrecognized arguments: {' '.join(extra)}")
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        from app.config import load_config

        args.cfg = load_config(args.config)
        rc = args.func(args)
    except Exception as exc:  # user-facing errors from any package: one line, exit 2
        if not getattr(exc, "user_error", False):
            raise
        print(f"mlte: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
