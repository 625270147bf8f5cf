"""The placement labs' OTTER-leads check (tests/lib/placement_checks.py): the same move is the same
decision (its byte ratio is a timing figure, printed), different moves are compared with NOISE."""
from __future__ import annotations

import pytest

from tests.lib.placement_checks import assert_otter_leads, same_moves

EL = ["udp 10.0.0.1:45000 -> 10.0.0.3:5201"]


def entry(weighted: float, moved: list[str], circuits: list[str]) -> dict:
    return {"weighted_bytes": weighted, "runs": [{"moved_flows": moved, "circuits": circuits}]}


def test_the_ci_run_that_failed_passes_as_the_same_move_landed_later():
    # the fresh-clone CI run of 2026-11-27 (evening), mesh6: otter 7.905, cspf 8.790, joint 3.027 MB
    by = {"otter": entry(7_904_832, EL, ["c0:A:4-C:4"]), "cspf": entry(8_789_977, EL, ["c0:A:4-C:4"]),
          "joint": entry(3_027_170, [], [])}
    assert same_moves(by["otter"], by["cspf"]) and not same_moves(by["otter"], by["joint"])
    assert_otter_leads(by, [])


def test_different_moves_get_the_tighter_bar_and_a_real_loss_still_fails():
    by = {"otter": entry(7.9, EL, ["c0:A:4-C:4"]), "cspf": entry(8.79, EL, ["c1:A:5-C:5"])}
    with pytest.raises(AssertionError, match="different moves"):
        assert_otter_leads(by, [], ("cspf",))
    by["cspf"] = entry(8.0, EL, ["c1:A:5-C:5"])  # 0.9875: within the noise
    assert_otter_leads(by, [], ("cspf",))


def test_the_same_move_on_a_busy_machine_is_printed_not_failed(capsys):
    # both cores busy: every policy's counts come later, by different amounts (issue 26 item 9)
    by = {"otter": entry(6.1, EL, ["c0:A:4-C:4"]), "cspf": entry(8.79, EL, ["c0:A:4-C:4"])}
    assert_otter_leads(by, [], ("cspf",))
    assert "otter / cspf: 0.694 (the same move" in capsys.readouterr().out
