"""An sFlow-RT backend behind the same interface as our collector (``flow_rates(now, agents)``).

For sites that already run sFlow-RT (InMon). It uses sFlow-RT's documented REST flow API:
``PUT /flow/{name}/json`` defines a flow (keys = the 5-tuple, value = bytes, so sFlow-RT reports
bytes per second), ``GET /activeflows/{agents}/{name}/json?maxFlows=&minValue=&aggMode=max`` reads
the largest active flows (``aggMode=max``: a flow seen by several agents counts once, as in
:class:`~monitor.sflow.estimator.FlowRateEstimator`) and ``DELETE /flow/{name}/json`` removes it.
sFlow-RT cannot be installed in our lab, so the tests run this client against a fake server
that serves the same JSON shapes.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

from monitor.sflow.estimator import FlowRate
from topology.flow import FiveTuple

FLOW_KEYS = ("ipsource,ipdestination,ipprotocol,"
             "or:tcpsourceport:udpsourceport,or:tcpdestinationport:udpdestinationport")


class SflowRtError(RuntimeError):
    """sFlow-RT unreachable or answering with an error."""

    user_error = True


class SflowRtBackend:
    def __init__(self, url: str = "http://127.0.0.1:8008", name: str = "mlte5tuple", timeout: float = 3.0,
                 max_flows: int = 1000, min_bytes_per_s: float = 0.0) -> None:
        self.url, self.name, self.timeout = url.rstrip("/"), name, timeout
        self.max_flows, self.min_value = max_flows, min_bytes_per_s

    def _req(self, method: str, path: str, body: object | None = None) -> object:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                text = resp.read().decode()
        except (urllib.error.URLError, OSError) as exc:
            raise SflowRtError(f"sFlow-RT {method} {self.url}{path}: {exc}") from None
        try:
            return json.loads(text) if text.strip() else None
        except json.JSONDecodeError:
            raise SflowRtError(f"sFlow-RT {method} {path}: not JSON: {text[:80]!r}") from None

    def define(self) -> None:
        self._req("PUT", f"/flow/{self.name}/json", {"keys": FLOW_KEYS, "value": "bytes"})

    def remove(self) -> None:
        self._req("DELETE", f"/flow/{self.name}/json")

    def flow_rates(self, now: float | None = None, agents: set[str] | None = None) -> list[FlowRate]:
        """Active flows, largest first (``now`` is unused: sFlow-RT keeps its own clock)."""
        who = ";".join(sorted(agents)) if agents else "ALL"
        q = urllib.parse.urlencode({"maxFlows": self.max_flows, "minValue": self.min_value, "aggMode": "max"})
        rows = self._req("GET", f"/activeflows/{urllib.parse.quote(who, safe=';')}/{self.name}/json?{q}")
        out = []
        for row in rows if isinstance(rows, list) else []:
            key = parse_key(str(row.get("key", "")))
            if key is None:
                continue
            agent = str(row.get("agent", ""))
            ds = str(row.get("dataSource", "0"))
            point = (agent, int(ds) if ds.isdigit() else 0)
            out.append(FlowRate(key, float(row.get("value", 0.0)), 0, (point,)))
        out.sort(key=lambda r: (-r.bytes_per_s, r.key))
        return out


def parse_key(key: str) -> FiveTuple | None:
    """sFlow-RT key ``src,dst,proto,sport,dport`` → FiveTuple (None if malformed)."""
    parts = key.split(",")
    if len(parts) != 5:
        return None
    try:
        return FiveTuple(parts[0], parts[1], int(parts[2]), int(parts[3] or 0), int(parts[4] or 0))
    except ValueError:
        return None
