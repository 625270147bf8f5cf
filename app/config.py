"""The mlte configuration: TOML, every key declared here with its default and type.

Unknown sections/keys and wrong types raise :class:`ConfigError` naming the key, so a typo never
silently falls back to a default. ``mlte config show`` prints the effective configuration.
Each area owns one section; add new keys to ``DEFAULTS`` with a comment saying what they mean.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import tomllib

from app.errors import ConfigError

#: ``[te] placement``: joint = the offload decider (app/te/decisions.py); otter, cspf = app/te/placement.py
PLACEMENTS = ("joint", "otter", "cspf")
#: ``[te] placement_scope``: the flows an imbalance event re-places (app/te/placement.py, ``scope_to_hop``)
PLACEMENT_SCOPES = ("named", "congested", "all")

DEFAULTS: dict[str, dict[str, Any]] = {
    "controller": {
        "listen_host": "127.0.0.1",  # OpenFlow listener address
        "listen_port": 6653,  # OpenFlow listener port (OF1.0 for OTS nodes, OF1.3 for packet switches)
        "lldp_interval": 1.0,  # seconds between LLDP rounds on each packet port
        "link_timeout": 5.0,  # a packet link not refreshed by LLDP for this long is deleted
        "log_file": "",  # handler exceptions go here as well as to stderr ("" = stderr only)
        "api_host": "127.0.0.1",  # local control API (JSON over HTTP) address
        "api_port": 8181,  # local control API port
        "api_auth": True,  # the control API requires its bearer token; false = UNSAFE: any local user may drive the network
        "api_token_file": "",  # the control API's token, mode 0600 ("" = $MLTE_API_TOKEN_FILE, else /run/mlte/api-token as root, ~/.local/state/mlte/api-token otherwise)
        "barrier_timeout": 5.0,  # seconds to wait for a BARRIER_REPLY (an XCON apply) before failing
        "scan_settle": 0.25,  # optical scan: seconds without new PORT_STATUS before a probe is read
        "scan_parallel": 0,  # optical scan: 0 = coded rounds over every OTS at once, N >= 2 = over N OTSes at a time, 1 = one probe at a time
        "static_file": "",  # optional static vendor topology file merged into the graph ("" = none)
        "access_default_mbps": 1000.0,  # capacity of a learned host's access edge when its switch port reports no speed
        "link_default_mbps": 1000.0,  # capacity of an LLDP packet link (not a circuit) when neither port reports a speed
        "db_queue_max": 1000,  # database writer queue bound (jobs); when full the oldest samples are dropped
        "reservation_poll": 1.0,  # seconds between looks at the database for reservations to light or release
        "circuit_stable_ms": 50.0,  # a new circuit's packet ports must stay up this long before rules go in (D)
        "circuit_timeout": 10.0,  # seconds for a new circuit's ports to come up and its packet link to be seen
        "verify_timeout": 3.0,  # seconds for probe traffic to show on a new path's rule counters
        "provision_retries": 2,  # a reservation whose lighting failed and rolled back is tried again this often ...
        "provision_retry": 1.0,  # ... after this many seconds, doubling (0 retries: FAILED at the first)
        "state_file": "",  # JSON file keeping the optical scan's adaptations across restarts ("" = not kept)
        "echo_interval": 2.0,  # seconds between ECHO_REQUESTs to every switch (a silent switch is dead ...)
        "echo_misses": 3,  # ... after this many unanswered in a row; 0 = never (os-ken's default)
        "restore": True,  # re-light reservations a failure broke, on a new path (docs/failures.md)
        "restore_holdoff": 0.0,  # seconds to wait after a failure before restoring (a flapping port settles)
        "restore_retry": 2.0,  # first back-off (s) of a DEGRADED reservation's retries; doubles up to 30 s
        # revert a restored reservation to its original path once that is repaired and has stayed clear
        # of faults for revert_hold_s (a flap restarts the hold); off: a revert is a second traffic move
        # nobody asked for (non-revertive is the usual default, G.808.1) — docs/failures.md, "Revert"
        "revert": False,
        "revert_hold_s": 30.0,
        "meter_reservations": False,  # meter static reservations at their bandwidth too (on with [web] grooming)
        # OpenFlow over TLS (docs/operations.md): listen_port then takes TLS only (no plain listener) and
        # every switch and OTS agent must show a certificate signed by the CA
        "tls": False,
        "tls_dir": "",  # a `mlte pki init` directory: ca-cert.pem, controller-cert.pem, controller-key.pem
        "tls_ca": "",  # the CA certificate(s) switches' certificates are checked against ("" = tls_dir's)
        "tls_cert": "",  # the controller's certificate ("" = tls_dir's)
        "tls_key": "",  # the controller's private key ("" = tls_dir's)
    },
    "ots": {
        "provision_delay_min": 0.150,  # seconds an XCON stays dark (drawn uniformly in [min, max])
        "provision_delay_max": 0.220,
        "unit_mbps": 1.0,  # lab scale: 1 bandwidth unit = this many Mbit/s (ODU0 = 1.25 units)
    },
    "te": {
        "enabled": False,  # load the elastic TE loop (app/controller/te_app.py): offload elephants, release them
        "poll": 1.0,  # seconds between reads of an offload's rule counters (elephant gone)
        "gone_intervals": 3,  # polls below the elephant threshold before the offload is released
        "min_hold_s": 10.0,  # a moved flow stays at least this long (damping)
        "max_moves": 2,  # at most this many moves ...
        "move_interval_s": 1.0,  # ... per this many seconds
        "min_gain_s": 1.0,  # a move must finish the flow at least this much sooner (offload gain)
        "young_horizon_s": 0.0,  # joint: an elephant the gain turns down on its bytes, with 2 fine counts >= the elephant rate and drops on its circuit, is judged as sending this many s more at its lower count (app/te/young.py; 0 = off)
        "overhead_s": 0.1,  # the controller's share of a switch-over, on top of the circuit's setup time
        "stable_ms": 50.0,  # D: a new circuit's ports up and stable this long before rules go in
        "verify_timeout": 3.0,  # seconds for the moved flow to show on the new rules' counters
        "grow_target_util": 0.5,  # balanced growth: link + parallel circuit run at most this full
        "grow_trigger_util": 0.7,  # the growth Damper's on level (the monitor's growth threshold)
        "shrink_util": 0.4,  # the parallel circuit goes when the whole load is below this x the link's capacity
        "grow_calm_intervals": 3,  # polls below shrink_util before the shrink
        "grow_hold_s": 30.0,  # a grown (or shrunk) link stays so at least this long
        "split_bits": 3,  # the split's granularity: shares of 1/2^bits of the TCP/UDP source-port residues
        "elastic_unit_mbps": 0.0,  # an elastic reservation's unit (start and step); 0 = ODU0 at the lab scale
        "elastic_grow_at": 0.9,  # grow when the measured rate >= this x provisioned
        "elastic_shrink_at": 0.5,  # shrink when it is < this x (provisioned - one unit)
        "elastic_busy_intervals": 1,  # reservation polls at/above grow_at before a grow
        "elastic_calm_intervals": 3,  # reservation polls below shrink_at before a shrink
        "elastic_hold_s": 5.0,  # at least this long between a change and a shrink
        "mapping": "static",  # load-aware mapping of a site pair's flows (app/controller/mapping_app.py): static | throughput | rtt
        "mapping_sites": [],  # the two site switches whose flows are mapped, e.g. ["A", "Z"] ([] = no mapping)
        "mapping_interval": 1.0,  # seconds between measurements (and weight updates) of the mapped paths
        "placement": "joint",  # joint (offload elephants by the joint circuit model) | otter | cspf (place every monitored flow, app/te/placement.py)
        "placement_period": 30.0,  # otter | cspf: seconds between periodic re-solves (PER) besides the imbalance events
        "placement_scope": "congested",  # otter | cspf: what an imbalance event re-places: named | congested | all (the PER re-solve: all)
    },
    "monitor": {
        "enabled": True,  # load the monitor app (coarse/fine monitoring, latency probes) in the controller
        "interval": 1.0,  # Ts: seconds between coarse port-counter polls
        "ewma_alpha": 0.3,  # weight of the newest sample in the moving average
        "growth_threshold": 0.70,  # balanced demand growth: smoothed utilization above this
        "imbalance_util_max": 0.60,  # unconstrained imbalance: drops while utilization below this
        "elephant_fraction": 0.10,  # a flow above this fraction of circuit capacity is an elephant
        "elephant_gone_intervals": 3,  # intervals below threshold before "elephant gone"
        "dominant_share": 0.5,  # balanced growth only if no flow carries more than this share of the circuit's traffic
        "min_small_flows": 2,  # unconstrained imbalance needs at least this many non-elephant flows beside the elephants
        "clear_intervals": 3,  # calm intervals (no drops, below growth threshold) before a hot spot is cleared
        "elephant_confidence_z": 1.96,  # an elephant's sampled rate must exceed the threshold by z standard errors (rate/sqrt(samples))
        "reply_timeout": 0.2,  # seconds a poll waits at most for its stats replies (the tick runs as soon as all are in)
        "fine_first_window": 0.5,  # seconds after a hot spot (by drops) to name elephants from the first fine samples (0 = wait for the next interval)
        "fine_early_poll": True,  # fine_backend = "flowstats": an early window reads the counting rules' stats first (else it sees the last poll's)
        "fine_early_follow": True,  # fine_backend = "flowstats": once an elephant is named, keep reading its count rules (by cookie) every fine_early_step s for fine_early_span s (the TE gain judges it again on each)
        "fine_early_step": 0.1,  # seconds between early windows after the first, until the elephants are named or the next poll
        "fine_early_span": 0.0,  # seconds after a hot spot by drops that early windows look for its elephants, across polls (0 = 1.5 intervals)
        "drop_watch_interval": 0.0,  # seconds between reads of the watched circuit ends' queue drops between polls (a hot spot by drops without waiting for the next Ts; 0 = off)
        "fine_everywhere": False,  # fine data on every packet switch all the time (the per-flow polling baseline of bench/monitor_detection.py)
        "fine_window": 1.0,  # seconds of sFlow samples per flow-rate estimate (= Ts: elephants named one interval after the hot spot)
        "probe_interval": 0.2,  # latency probes: seconds between probes per packet link (seed 001: 200 ms; 0 = no probes)
        "probe_rate": 100.0,  # latency probes (and their echoes) per second in all at most: past it links take turns (0 = no limit)
        "path_change_tolerance_ms": 0.5,  # path-change detector: stable band and minimum shift (seed 001: 0.5 ms)
        "probe_timeout": 2.0,  # latency probes: a probe not back after this many seconds is lost
        "flowstats_idle_timeout": 10,  # fine_backend = "flowstats": a per-flow counting rule idles out after this many seconds
        "flowstats_refresh": 0.5,  # fine_backend = "flowstats": s between the switch's counter refreshes at most (userspace OVS: max-revalidator, 500 ms); rates are taken between refresh steps
        "flowstats_max_flows": 1000,  # fine_backend = "flowstats": at most this many counting rules per switch
        "sflow_sampling": 64,  # 1-in-N packet sampling on hot spots
        "sflow_polling": 1,  # seconds between sFlow counter samples
        "sflow_collector_port": 6343,
        "fine_backend": "sflow",  # sflow | flowstats | sflow-rt
        "sflow_rt_url": "http://127.0.0.1:8008",
        "retention_seconds": 3600,  # time series kept in the DB
    },
    "pce": {
        "solver": "highs",  # highs | cbc
        "k_paths": 4,
    },
    "ha": {
        "etcd": [],  # etcd client URLs (e.g. ["http://127.0.0.1:2379"]): several controllers, one elected leader; [] = one controller
        "key": "/mlte/leader",  # the election key in etcd (one per mlte deployment)
        "ttl": 1.0,  # lease TTL (s): a dead or frozen leader loses mastership this long after its last keep-alive
        "name": "",  # this controller's name in the election ("" = hostname:listen_port)
    },
    "db": {
        "url": "sqlite:///mlte.db",  # SQLAlchemy URL; postgresql+psycopg://user@host/db for PostgreSQL
    },
    "web": {
        "host": "127.0.0.1",
        "port": 8080,
        "hold_seconds": 300,  # a HELD reservation expires after this long unless committed
        "login_max_failures": 5,  # failed UI logins per user name (x4 per address) before a lockout
        "login_window_seconds": 300,  # ... counted over this sliding window, which is also the lockout
        # grooming (docs/pce-paths.md): admission lets a reservation ride a circuit other reservations booked
        # for an overlapping window when it has room; off until the controller provisions shared circuits
        "grooming": False,
    },
}


def _check(section: str, key: str, value: Any, default: Any) -> Any:
    expected = type(default)
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise ConfigError(
            f"[{section}] {key} must be {expected.__name__}, got {type(value).__name__} {value!r}"
        )
    return value


def merge_config(overrides: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Return DEFAULTS updated with ``overrides``; raise ConfigError on unknown keys or bad types."""
    cfg = copy.deepcopy(DEFAULTS)
    for section, values in overrides.items():
        if section not in cfg:
            raise ConfigError(f"unknown config section [{section}] (known: {', '.join(cfg)})")
        if not isinstance(values, dict):
            raise ConfigError(f"[{section}] must be a table")
        for key, value in values.items():
            if key not in cfg[section]:
                raise ConfigError(f"unknown key [{section}] {key} (known: {', '.join(cfg[section])})")
            cfg[section][key] = _check(section, key, value, DEFAULTS[section][key])
    if not 0 < cfg["controller"]["access_default_mbps"] < float("inf"):
        raise ConfigError("[controller] access_default_mbps must be a finite number > 0")
    if not 0 < cfg["controller"]["link_default_mbps"] < float("inf"):
        raise ConfigError("[controller] link_default_mbps must be a finite number > 0")
    if cfg["controller"]["db_queue_max"] < 1:
        raise ConfigError("[controller] db_queue_max must be >= 1")
    for key in ("reservation_poll", "circuit_timeout", "verify_timeout"):
        if not 0 < cfg["controller"][key] < float("inf"):
            raise ConfigError(f"[controller] {key} must be a finite number of seconds > 0")
    if not 0 < cfg["controller"]["echo_interval"] < float("inf"):
        raise ConfigError("[controller] echo_interval must be a finite number of seconds > 0")
    if cfg["controller"]["scan_parallel"] < 0:
        raise ConfigError("[controller] scan_parallel must be >= 0 (0 = every OTS at once, 1 = one probe at a time)")
    if cfg["controller"]["echo_misses"] < 0:
        raise ConfigError("[controller] echo_misses must be >= 0 (0 = a silent switch is never dropped)")
    if not 0 <= cfg["controller"]["restore_holdoff"] < float("inf"):
        raise ConfigError("[controller] restore_holdoff must be a finite number of seconds >= 0")
    if not 0 <= cfg["controller"]["provision_retries"] <= 10:
        raise ConfigError("[controller] provision_retries must be an integer from 0 to 10")
    if not 0 < cfg["controller"]["provision_retry"] < float("inf"):
        raise ConfigError("[controller] provision_retry must be a finite number of seconds > 0")
    if not 0 < cfg["controller"]["restore_retry"] < float("inf"):
        raise ConfigError("[controller] restore_retry must be a finite number of seconds > 0")
    if not 0 <= cfg["controller"]["revert_hold_s"] < float("inf"):
        raise ConfigError("[controller] revert_hold_s must be a finite number of seconds >= 0")
    if not 0 <= cfg["controller"]["circuit_stable_ms"] < float("inf"):
        raise ConfigError("[controller] circuit_stable_ms must be a finite number >= 0")
    _check_tls(cfg["controller"])
    ots = cfg["ots"]
    if not 0 <= ots["provision_delay_min"] <= ots["provision_delay_max"]:
        raise ConfigError("[ots] needs 0 <= provision_delay_min <= provision_delay_max")
    if not 0 < cfg["monitor"]["ewma_alpha"] <= 1:
        raise ConfigError("[monitor] ewma_alpha must be in (0, 1]")
    if cfg["monitor"]["interval"] <= 0:
        raise ConfigError("[monitor] interval must be > 0")
    if cfg["monitor"]["drop_watch_interval"] < 0 or cfg["monitor"]["fine_early_step"] <= 0 \
            or cfg["monitor"]["fine_early_span"] < 0:
        raise ConfigError("[monitor] needs drop_watch_interval >= 0, fine_early_step > 0 and fine_early_span >= 0")
    if cfg["monitor"]["fine_backend"] not in ("sflow", "flowstats", "sflow-rt"):
        raise ConfigError('[monitor] fine_backend must be "sflow", "flowstats" or "sflow-rt"')
    _check_mapping(cfg["te"])
    _check_placement(cfg["te"])
    _check_growth_elastic(cfg["te"])
    if cfg["monitor"]["probe_interval"] < 0:
        raise ConfigError("[monitor] probe_interval must be >= 0 (0 = no latency probes)")
    if not 0 <= cfg["monitor"]["probe_rate"] < float("inf"):
        raise ConfigError("[monitor] probe_rate must be a number of probes per second >= 0 (0 = no limit)")
    if not 0 < cfg["ha"]["ttl"] < float("inf"):
        raise ConfigError("[ha] ttl must be a finite number of seconds > 0")
    if not all(isinstance(e, str) and e.startswith(("http://", "https://")) for e in cfg["ha"]["etcd"]):
        raise ConfigError('[ha] etcd must be a list of etcd client URLs such as "http://127.0.0.1:2379"')
    _check_web(cfg["web"])
    _check_pce(cfg["pce"])
    return cfg


#: ``[pce] solver``: the LP solvers PuLP drives here (pce/highs.py and PuLP's bundled CBC).
PCE_SOLVERS = ("highs", "cbc")


def tls_files(ctl: dict[str, Any]) -> tuple[str, str, str]:
    """``[controller]``'s TLS files (CA, certificate, key): each explicit key, else its file in ``tls_dir``."""
    d = Path(ctl["tls_dir"])
    return (ctl["tls_ca"] or str(d / "ca-cert.pem"), ctl["tls_cert"] or str(d / "controller-cert.pem"),
            ctl["tls_key"] or str(d / "controller-key.pem"))


def _check_tls(ctl: dict[str, Any]) -> None:
    """``tls = true`` needs every file named, by ``tls_dir`` or by the three path keys."""
    if ctl["tls"] and not ctl["tls_dir"] and not (ctl["tls_ca"] and ctl["tls_cert"] and ctl["tls_key"]):
        raise ConfigError("[controller] tls = true needs tls_dir (a `mlte pki init` directory) "
                          "or all of tls_ca, tls_cert and tls_key")


def _check_pce(pce: dict[str, Any]) -> None:
    """``[pce]``: the values ``mlte pce`` would refuse later (naming a flag the user never passed)."""
    if pce["solver"] not in PCE_SOLVERS:
        raise ConfigError(f'[pce] solver must be one of {", ".join(PCE_SOLVERS)}, got {pce["solver"]!r}')
    if pce["k_paths"] < 1:
        raise ConfigError(f"[pce] k_paths must be >= 1 (paths per demand), got {pce['k_paths']}")


def _check_mapping(te: dict[str, Any]) -> None:
    """The ``[te] mapping*`` keys: a known policy, two distinct site switch names, a positive interval."""
    if te["mapping"] not in ("static", "throughput", "rtt"):
        raise ConfigError('[te] mapping must be "static", "throughput" or "rtt"')
    sites = te["mapping_sites"]
    if sites and (len(sites) != 2 or not all(isinstance(x, str) and x for x in sites) or sites[0] == sites[1]):
        raise ConfigError('[te] mapping_sites must be [] or two different switch names, e.g. ["A", "Z"]')
    if not 0 < te["mapping_interval"] < float("inf"):
        raise ConfigError("[te] mapping_interval must be a finite number of seconds > 0")


def _check_placement(te: dict[str, Any]) -> None:
    """``[te] placement``: one of the TE loop's placement policies, and a positive PER period."""
    if te["placement"] not in PLACEMENTS:
        raise ConfigError(f'[te] placement must be one of {", ".join(PLACEMENTS)}, got {te["placement"]!r}')
    if not 0 < te["placement_period"] < float("inf"):
        raise ConfigError("[te] placement_period must be a finite number of seconds > 0")
    if te["placement_scope"] not in PLACEMENT_SCOPES:
        raise ConfigError(f'[te] placement_scope must be one of {", ".join(PLACEMENT_SCOPES)}, '
                          f'got {te["placement_scope"]!r}')


def _check_growth_elastic(te: dict[str, Any]) -> None:
    """The balanced-growth and elastic-reservation keys of ``[te]``: the values their deciders refuse,
    reported at start-up with the key's name instead of as a traceback from the app's constructor."""
    if not 0 < te["grow_target_util"] <= 1:
        raise ConfigError("[te] grow_target_util must be in (0, 1]")
    if not 0 < te["shrink_util"] < te["grow_trigger_util"]:
        raise ConfigError("[te] needs 0 < shrink_util < grow_trigger_util")
    if te["grow_calm_intervals"] < 1 or te["elastic_busy_intervals"] < 1 or te["elastic_calm_intervals"] < 1:
        raise ConfigError("[te] grow_calm_intervals, elastic_busy_intervals, elastic_calm_intervals must be >= 1")
    if not 1 <= te["split_bits"] <= 8:
        raise ConfigError("[te] split_bits must be in 1..8")
    if not 0 < te["elastic_shrink_at"] < te["elastic_grow_at"] <= 1:
        raise ConfigError("[te] needs 0 < elastic_shrink_at < elastic_grow_at <= 1")
    for key in ("grow_hold_s", "elastic_hold_s", "elastic_unit_mbps"):
        if not 0 <= te[key] < float("inf"):
            raise ConfigError(f"[te] {key} must be a finite number >= 0")


def _check_web(web: dict[str, Any]) -> None:
    """The ``[web]`` values ``mlte web`` could not serve with (also what ``mlte config check`` reports)."""
    if not web["host"].strip():
        raise ConfigError("[web] host must not be empty (e.g. 127.0.0.1, or 0.0.0.0 for every address)")
    if not 1 <= web["port"] <= 65535:
        raise ConfigError(f"[web] port {web['port']} out of range 1..65535")
    if not 0 < web["hold_seconds"]:
        raise ConfigError("[web] hold_seconds must be > 0")
    if web["login_max_failures"] < 1:
        raise ConfigError("[web] login_max_failures must be >= 1")
    if not 0 < web["login_window_seconds"]:
        raise ConfigError("[web] login_window_seconds must be > 0")


def load_config(path: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """Load a TOML file over the defaults (``None`` = defaults only)."""
    if path is None:
        return merge_config({})
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {p}") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {p} is a directory; give a TOML file (see `mlte config show`)") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {p}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not a text (UTF-8) TOML file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: invalid TOML: {exc}") from None
    return merge_config(data)


def dump_toml(cfg: dict[str, dict[str, Any]]) -> str:
    """Render a config as TOML (flat tables of scalars only)."""
    lines: list[str] = []
    for section, values in cfg.items():
        lines.append(f"[{section}]")
        for key, value in values.items():
            if isinstance(value, bool):
                text = "true" if value else "false"
            elif isinstance(value, str):
                text = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
            else:
                text = repr(value)
            lines.append(f"{key} = {text}")
        lines.append("")
    return "\n".join(lines)
