"""Work-arounds for os-ken 4.2.2 bugs that break a mixed OF1.0 + OF1.3 controller.

- ``os_ken.controller.ofp_handler.error_msg_handler`` reads ``ofp.OFPET_EXPERIMENTER``, which
  ``ofproto_v1_0`` lacks: the AttributeError is raised in the datapath's receive loop, so the first
  OpenFlow ERROR from an OF1.0 switch (an OTS refusing a non-XCON FLOW_MOD) drops its connection.
  The fix lives next to the OTS protocol helpers (``ots_virtual.protocol``); we apply it here.
"""
from __future__ import annotations


def patch_os_ken() -> None:
    from ots_virtual.protocol import patch_os_ken_of10_errors

    patch_os_ken_of10_errors()
