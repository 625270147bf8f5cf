"""What a delay link applies, checked once, and how each backend spells it.

``delay_ms`` is one-way and per direction (as netem's): a frame either way is held ``delay_ms``, so a
ping through one element sees about twice it. ``jitter_ms`` is uniform in ±jitter (never above the
delay) and never reorders; ``loss`` is a per-frame probability in each direction; ``rate_mbps``
serialises frames at that rate after the delay, queueing up to ``limit`` frames per direction.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

IFNAME = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")


class DelayConfigError(ValueError):
    """A delay-link setting out of range (a one-line reason naming the setting)."""

    user_error = True


def check_ifname(name: str) -> str:
    """An interface name Linux accepts (1-15 characters, no spaces or slashes)."""
    if not isinstance(name, str) or not IFNAME.match(name):
        raise DelayConfigError(f"bad interface name {name!r} (1-15 characters of A-Z a-z 0-9 _ . -)")
    return name


def _number(name: str, value: object, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DelayConfigError(f"{name} must be a number, not {value!r}")
    if not lo <= value <= hi:
        raise DelayConfigError(f"{name} must be in [{lo:g}, {hi:g}], not {value!r}")
    return float(value)


@dataclass(frozen=True)
class DelayConfig:
    """Delay, jitter, loss and rate of one element (validated on construction)."""

    delay_ms: float
    jitter_ms: float = 0.0
    loss: float = 0.0
    rate_mbps: float | None = None
    limit: int = 10000
    seed: int = 1

    def __post_init__(self) -> None:
        _number("delay_ms", self.delay_ms, 0.0, 60_000.0)
        _number("jitter_ms", self.jitter_ms, 0.0, 60_000.0)
        if self.jitter_ms > self.delay_ms:
            raise DelayConfigError(f"jitter_ms ({self.jitter_ms:g}) must not exceed delay_ms ({self.delay_ms:g})")
        _number("loss", self.loss, 0.0, 1.0)
        if self.rate_mbps is not None:
            _number("rate_mbps", self.rate_mbps, 0.001, 100_000.0)
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or not 1 <= self.limit <= 1_000_000:
            raise DelayConfigError(f"limit must be an integer in [1, 1000000], not {self.limit!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**53:
            raise DelayConfigError(f"seed must be a non-negative integer, not {self.seed!r}")

    def element_args(self) -> list[str]:
        """Arguments of ``dlyfwd`` for this configuration (interfaces excluded)."""
        args = ["--delay-us", f"{self.delay_ms * 1000:.3f}", "--jitter-us", f"{self.jitter_ms * 1000:.3f}",
                "--loss", f"{self.loss:.9g}", "--limit", str(self.limit), "--seed", str(self.seed)]
        if self.rate_mbps is not None:
            args += ["--rate-bps", f"{self.rate_mbps * 1e6:.0f}"]
        return args

    def netem_args(self) -> list[str]:
        """The ``tc qdisc ... netem`` parameters for the same behaviour (one direction's egress)."""
        args = ["limit", str(self.limit), "delay", f"{self.delay_ms * 1000:.0f}us"]
        if self.jitter_ms:
            args += [f"{self.jitter_ms * 1000:.0f}us"]
        if self.loss:
            args += ["loss", f"{self.loss * 100:.6g}%"]
        if self.rate_mbps is not None:
            args += ["rate", f"{self.rate_mbps * 1e6:.0f}bit"]
        return args

    def to_json(self) -> dict[str, float | int | None]:
        """The configured values, as a lab records them next to what it measured."""
        return {"delay_ms": self.delay_ms, "jitter_ms": self.jitter_ms, "loss": self.loss,
                "rate_mbps": self.rate_mbps, "limit": self.limit}
