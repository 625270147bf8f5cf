"""Work-arounds for os-ken 4.2.2 bugs that break a mixed OF1.0 + OF1.3 controller.

- ``os_ken.controller.ofp_handler.error_msg_handler`` reads ``ofp.OFPET_EXPERIMENTER``, which
  ``ofproto_v1_0`` lacks (OF1.0 has no experimenter error type). The AttributeError is raised in
  the datapath's receive loop, so the *first* OpenFlow ERROR from an OF1.0 switch (e.g. an OTS
  rejecting a non-XCON FLOW_MOD) tears down its connection. A type value OF1.0 never uses
  (0xffff, the OF1.3 experimenter type) keeps the comparison false.
"""
from __future__ import annotations


def patch_os_ken() -> None:
    from os_ken.ofproto import ofproto_v1_0

    if not hasattr(ofproto_v1_0, "OFPET_EXPERIMENTER"):
        ofproto_v1_0.OFPET_EXPERIMENTER = 0xFFFF
