"""OTTER's 5G application profiles (paper Table 5) and the pinning rule of §7.2.

Profiles give the guideline values from which every flow's demand functions are drawn (±25%).
RTT demand = 2 × one-way latency (digest). Loss is a rate (1e-2 = 1%); paths report percent.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    """One Table 5 row: throughput Mbit/s, one-way latency ms, jitter ms (None = no demand), loss rate."""

    name: str
    throughput_mbps: float
    latency_ms: float
    jitter_ms: float | None
    loss_rate: float

    @property
    def rtt_ms(self) -> float:
        return 2.0 * self.latency_ms


PROFILES: tuple[Profile, ...] = (
    Profile("conversational-voice", 0.3, 100.0, None, 1e-2),
    Profile("live-video", 1.5, 150.0, None, 1e-3),
    Profile("buffered-video", 15.0, 300.0, None, 1e-6),
    Profile("mc-ptt-voice", 1.0, 75.0, None, 1e-2),
    Profile("augmented-reality", 20.0, 10.0, None, 1e-6),
    Profile("gaming", 10.0, 50.0, 10.0, 1e-3),
    Profile("remote-driving", 1.0, 5.0, None, 1e-4),
    Profile("intelligent-transport", 1.0, 30.0, None, 1e-5),
)

#: Digest choice: a flow is RTT/jitter-sensitive (pinned by PATHPIN/DSTPIN) when its profile's
#: latency is at most this many ms or it has a jitter demand.
PIN_LATENCY_MS = 60.0


def is_sensitive(profile: Profile) -> bool:
    """True when PER+PATHPIN / PER+DSTPIN must not move flows of this profile."""
    return profile.latency_ms <= PIN_LATENCY_MS or profile.jitter_ms is not None


SENSITIVE = tuple(is_sensitive(p) for p in PROFILES)
