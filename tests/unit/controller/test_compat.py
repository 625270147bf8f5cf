"""The os-ken OF1.0 ERROR work-around is applied by the launcher's patch step."""
from os_ken.ofproto import ofproto_v1_0

from app.controller.compat import patch_os_ken


def test_of10_has_experimenter_error_type_after_patch():
    patch_os_ken()
    assert ofproto_v1_0.OFPET_EXPERIMENTER == 0xFFFF
    assert ofproto_v1_0.OFPET_EXPERIMENTER not in (ofproto_v1_0.OFPET_HELLO_FAILED, ofproto_v1_0.OFPET_BAD_REQUEST,
                                                  ofproto_v1_0.OFPET_BAD_ACTION, ofproto_v1_0.OFPET_FLOW_MOD_FAILED,
                                                  ofproto_v1_0.OFPET_PORT_MOD_FAILED, ofproto_v1_0.OFPET_QUEUE_OP_FAILED)
