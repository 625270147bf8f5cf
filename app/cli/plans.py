"""``mlte plans``: the update plans the controller executed, with per-step times.

Reads the database (reservation plans, kept for good) or, with ``--api-port``, a running
controller's control API (every plan of that run, ``POST /plan`` ones included).
"""
from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import Any

from app.cli.controller import tcp_port
from app.errors import MlteError


class PlansError(MlteError):
    """The plans could not be read."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plans", help="executed update plans (ordered / one-shot) with per-step times")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--db", help="database URL or SQLite file (default [db] url)")
    src.add_argument("--api-port", type=tcp_port, help="read a running controller's control API instead")
    p.add_argument("--reservation", type=int, help="only the plans of this reservation")
    p.add_argument("--limit", type=int, default=20, help="newest N plans (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print the records as JSON")
    p.set_defaults(func=_run)


def _t(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    return datetime.fromisoformat(str(v).replace("Z", "+00:00")).timestamp()


def _fetch(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.limit < 1:
        raise PlansError("--limit must be >= 1")
    if args.api_port:
        from app.controller.client import ControlApiError, ControllerClient

        q = f"?limit={args.limit}" + (f"&reservation={args.reservation}" if args.reservation is not None else "")
        try:
            ctl = args.cfg["controller"]
            client = ControllerClient(port=args.api_port, timeout=10, token_config=ctl["api_token_file"],
                                      auth=ctl["api_auth"])
            return client.request("GET", "/plans" + q)
        except (ControlApiError, OSError) as exc:
            raise PlansError(f"control API on port {args.api_port}: {exc}") from None
    from app.cli.startup import check_database_exists
    from app.db.migrate import open_migrated
    from app.db.provisioning import ProvisioningStore

    url = args.db or args.cfg["db"]["url"]
    check_database_exists(url, "--db" if args.db else "[db] url")  # reading must not create an empty one
    if "://" not in url:
        url = f"sqlite:///{url}"
    try:
        db = open_migrated(url)
    except Exception as exc:  # noqa: BLE001 - any driver/connection error: one line
        raise PlansError(f"database {url}: {str(exc).splitlines()[0]}") from None
    try:
        return ProvisioningStore(db).plans(args.limit, args.reservation)
    finally:
        db.dispose()


def _run(args: argparse.Namespace) -> int:
    plans = _fetch(args)
    if args.json:
        print(json.dumps(plans, indent=2, sort_keys=True))
        return 0
    if not plans:
        print("no plans recorded")
        return 0
    for p in plans:
        t0 = _t(p.get("started_at", p.get("started")))
        t1 = _t(p.get("finished_at", p.get("finished")))
        took = f"{(t1 - t0) * 1000:.0f} ms" if t0 is not None and t1 is not None else "?"
        res = f" reservation {p['reservation_id']}" if p.get("reservation_id") is not None else ""
        err = f": {p['error']}" if p.get("error") else ""
        print(f"plan {p.get('id')} {p.get('kind')} ({p.get('mode')}){res}: {p.get('state')} in {took}{err}")
        for s in p.get("steps", []):
            s0, s1 = _t(s.get("started_at")), _t(s.get("finished_at"))
            at = f"+{(s0 - t0) * 1000:7.1f} ms" if s0 is not None and t0 is not None else "     never"
            dur = f"{(s1 - s0) * 1000:7.1f} ms" if s0 is not None and s1 is not None else ""
            mark = {True: "ok", False: "FAILED", None: "-"}[s.get("ok")]
            print(f"  {at} {dur:>10}  {mark:<6} {s.get('kind', ''):<12} {s.get('target', '')}"
                  + (f"  ({s['error']})" if s.get("error") else ""))
    return 0
