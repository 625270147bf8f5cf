"""Fixtures of the update tests: fake networks that are always closed (their scheduler thread stops)."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.lib.fake_network import FakeNetwork, Fig2Move, fig2_move, fig2_network


@pytest.fixture
def make_net() -> Iterator[Callable[..., FakeNetwork]]:
    """``make_net(**kw)``: a Fig. 2 fake network with nothing installed."""
    nets: list[FakeNetwork] = []

    def make(**kw: Any) -> FakeNetwork:
        net = fig2_network(**kw)
        nets.append(net)
        return net

    yield make
    for net in nets:
        net.close()


@pytest.fixture
def fig2(make_net: Callable[..., FakeNetwork]) -> Callable[..., tuple[FakeNetwork, Fig2Move]]:
    """``fig2(**kw)``: the Fig. 2 network carrying reservation 7 on the initial path A-X-Y-B-Y-Z-C."""

    def make(**kw: Any) -> tuple[FakeNetwork, Fig2Move]:
        sc = fig2_move()
        net = make_net(**kw)
        net.preload(sc.old_xcons, sc.old_state_rules)
        return net, sc

    return make
