"""The two OpenFlow 1.3 rule operations our packet-switch apps need (LLDP trap, forwarding).

Each app owns the rules carrying its cookie; deleting by cookie (full mask) leaves every other
app's rules alone, so apps never have to agree on who cleans a table.
"""
from __future__ import annotations

from typing import Any

ALL_COOKIE_BITS = 0xFFFFFFFFFFFFFFFF


def add_flow(dp: Any, cookie: int, priority: int, match: Any, actions: list) -> None:
    """Install (or overwrite) one rule ``match -> apply actions`` in table 0."""
    parser, ofp = dp.ofproto_parser, dp.ofproto
    inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
    dp.send_msg(parser.OFPFlowMod(datapath=dp, cookie=cookie, priority=priority, match=match, instructions=inst))


def delete_flows(dp: Any, cookie: int, match: Any, priority: int | None = None) -> None:
    """Delete the rules with ``cookie``: exactly ``match`` at ``priority`` (strict) when a priority is
    given, otherwise every rule in every table that ``match`` covers."""
    parser, ofp = dp.ofproto_parser, dp.ofproto
    strict = priority is not None
    dp.send_msg(parser.OFPFlowMod(
        datapath=dp, cookie=cookie, cookie_mask=ALL_COOKIE_BITS,
        command=ofp.OFPFC_DELETE_STRICT if strict else ofp.OFPFC_DELETE,
        table_id=0 if strict else ofp.OFPTT_ALL, priority=priority if strict else 0,
        out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY, match=match,
    ))
