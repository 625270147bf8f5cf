"""Start the mlte controller: os-ken on the eventlet hub with our apps, in this process.

Why the eventlet hub: os-ken 4.x's default native hub ignores ``hub.Event().wait(timeout)``
(docs/controller.md); we select eventlet through ``OSKEN_HUB_TYPE`` *before* the first os-ken
import, because ``os_ken.lib.hub`` reads it at import time. The app modules are imported before
``cfg.CONF`` is parsed so their options are registered (environment notes).
"""
from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import socket
import sys
import warnings
from typing import Any

APPS = [
    "app.controller.openflow_southbound",
    "app.controller.mastership_app",
    "app.controller.inventory",
    "app.controller.lldp",
    "app.controller.forwarding",
    "app.controller.ots_driver",
    "app.controller.control_api",
    "app.controller.metrics_app",  # GET /metrics (Prometheus)
]

TOPOLOGY_PUBLISHER = "app.controller.topology_publisher"  # topology snapshots + circuits for the web service, when a DB is set
TE = "app.controller.te_app"  # the elastic TE loop, with [te] enabled = true (needs the monitor)
RESERVATIONS = "app.controller.reservations_app"  # follows the reservations in the DB: lights and releases them
MAPPING = "app.controller.mapping_app"  # load-aware mapping of a site pair's flows, when [te] mapping_sites is set
PLAN_RECOVERY = "app.controller.plan_recovery_app"  # several controllers with a DB: a dead leader's plans (issue 24)
MONITOR = "app.controller.monitor_app"  # coarse/fine monitoring + latency probes, unless [monitor] enabled = false

LOG = logging.getLogger("mlte.controller")


class PortInUse(Exception):
    """The OpenFlow or API port is taken (another controller running?)."""

    user_error = True


def _check_free(host: str, port: int, what: str) -> None:
    """Fail with a one-line message now rather than with a traceback inside os-ken later."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OverflowError:  # a port out of range from the config file
            raise PortInUse(f"{what} {host}:{port}: port out of range 1..65535") from None
        except OSError as exc:
            raise PortInUse(f"{what} {host}:{port} is not available ({exc.strerror or exc}); "
                            f"is another controller running? (see --of-port / --api-port)") from None


def _select_hub() -> None:
    if "os_ken.lib.hub" in sys.modules:
        from os_ken.lib import hub

        if hub.HUB_TYPE != "eventlet":
            raise RuntimeError("os_ken was imported with the native hub before the launcher ran")
        return
    os.environ["OSKEN_HUB_TYPE"] = "eventlet"
    warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")


def real_log_locks() -> None:
    """Give every logging handler (and logging's module lock) a real OS-thread lock. Monkey patching
    turns the existing locks green, and a green lock is no lock between OS threads: the database writer's
    thread logging while the hub's thread held a handler's lock ended in "greenlet.error: Cannot switch to
    a different thread" and a controller that never answered (CI, a controller whose start-up logs a
    warning). A real lock is held only for one record's write, which never yields to the hub."""
    from eventlet import patcher

    real = patcher.original("threading")
    setattr(logging, "_lock", real.RLock())  # noqa: B010 - the module's private lock, taken by getLogger
    loggers = [logging.getLogger(), *(x for x in logging.Logger.manager.loggerDict.values()
                                      if isinstance(x, logging.Logger))]
    for logger in loggers:
        for handler in logger.handlers:
            handler.lock = real.RLock()


def _announce(line: str) -> None:
    """The start-up line: an INFO record when INFO is logged (``-v``), else a plain line on stderr —
    never a WARNING, which would read as a problem (default log level: WARNING)."""
    if LOG.isEnabledFor(logging.INFO):
        LOG.info("%s", line)
    else:
        print(line, file=sys.stderr, flush=True)


def check_app_modules(modules: list[str]) -> None:
    """ConfigError (one line) for an ``--app`` module that does not exist, before os-ken starts."""
    from app.errors import ConfigError

    for mod in modules:
        try:
            found = importlib.util.find_spec(mod) is not None
        except (ModuleNotFoundError, ValueError):  # a parent package is missing / an empty name
            found = False
        if not found:
            raise ConfigError(f"--app {mod}: no such module")


def tls_args(ctl: dict[str, Any]) -> list[str]:
    """os-ken's options for ``[controller] tls``: TLS only on ``listen_port`` (no plain-TCP listener),
    client certificates required (app/controller/compat.py). Each file is tried now, so a missing,
    unreadable or mismatched one is a one-line ConfigError naming its key, not a failure inside os-ken."""
    import ssl

    from app.config import tls_files
    from app.controller.compat import server_context
    from app.errors import ConfigError

    ca, cert, key = tls_files(ctl)
    for name, path in (("tls_ca", ca), ("tls_cert", cert), ("tls_key", key)):
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            raise ConfigError(f"[controller] {name} {path}: {exc.strerror or exc}") from None
    try:
        server_context(ca, cert, key)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise ConfigError(f"[controller] TLS files {ca}, {cert}, {key}: {exc}") from None
    return ["--ofp-ssl-listen-port", str(ctl["listen_port"]), "--ctl-privkey", key, "--ctl-cert", cert,
            "--ca-certs", ca]


def run(cfg: dict[str, dict[str, Any]], names: dict[int, str] | None = None,
        extra_apps: list[str] | None = None, host_names: dict[str, str] | None = None) -> None:
    """Run the controller until interrupted (blocks); ``extra_apps``: more os-ken app modules to load
    (each must declare ``OFP_VERSIONS = [OF1.0, OF1.3]``, see docs/controller.md)."""
    ctl = cfg["controller"]
    check_app_modules(extra_apps or [])
    of_args = tls_args(ctl) if ctl.get("tls") else ["--ofp-tcp-listen-port", str(ctl["listen_port"])]
    _check_free(str(ctl["listen_host"]), int(ctl["listen_port"]), "OpenFlow listen address")
    _check_free(str(ctl["api_host"]), int(ctl["api_port"]), "control API address")
    _select_hub()
    from os_ken.lib import hub

    hub.patch(thread=True)
    from os_ken import cfg as oscfg
    from os_ken.base.app_manager import AppManager

    from app.controller import guard
    from app.controller.compat import patch_os_ken
    from app.controller.runtime import SETTINGS

    patch_os_ken()

    apps = APPS + ([TOPOLOGY_PUBLISHER, RESERVATIONS] if cfg.get("db", {}).get("url") else [])
    apps += [PLAN_RECOVERY] if cfg.get("db", {}).get("url") and cfg.get("ha", {}).get("etcd") else []
    apps += [MONITOR] if cfg.get("monitor", {}).get("enabled", True) else []
    apps += [TE] if cfg.get("te", {}).get("enabled", False) and MONITOR in apps else []
    apps += [MAPPING] if cfg.get("te", {}).get("mapping_sites") else []
    apps += [m for m in (extra_apps or []) if m not in apps]
    for mod in [*apps, "os_ken.controller.controller"]:  # the last: the echo options below
        importlib.import_module(mod)  # registers their options before parsing
    SETTINGS.controller = dict(ctl)
    SETTINGS.ots = dict(cfg["ots"])
    SETTINGS.db_url = cfg.get("db", {}).get("url", "")
    SETTINGS.monitor = dict(cfg.get("monitor", {}))
    SETTINGS.ha = dict(cfg.get("ha", {}))  # several controllers: the election (docs/operations.md)
    SETTINGS.te = dict(cfg.get("te", {}))  # read by the TE, mapping and reservations apps (docs/te-loop.md)
    SETTINGS.names = dict(names or {})
    SETTINGS.host_names = {mac.lower(): n for mac, n in (host_names or {}).items()}
    if ctl["log_file"]:
        guard.add_log_file(ctl["log_file"])
    real_log_locks()
    oscfg.CONF(
        args=[
            "--ofp-listen-host",
            str(ctl["listen_host"]),
            *of_args,
        ],
        project="os_ken",
    )
    # a switch that stops answering is dropped (and its failure handled) after a few seconds, not
    # never: os-ken's own echo loop closes the session (docs/failures.md)
    oscfg.CONF.set_override("echo_request_interval", float(ctl["echo_interval"]))
    oscfg.CONF.set_override("maximum_unreplied_echo_requests", int(ctl["echo_misses"]))
    _announce(f"mlte controller: OpenFlow{' over TLS' if ctl.get('tls') else ''} on {ctl['listen_host']}:{ctl['listen_port']}, "
              f"control API on http://{ctl['api_host']}:{ctl['api_port']}")
    AppManager.run_apps(apps)
