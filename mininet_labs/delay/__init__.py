"""Delay, jitter, loss and rate for lab links without netem (docs/delay-element.md).

``DelayLink`` applies them between two interfaces (netem if the kernel has it, else the C forwarder
``dlyfwd``); ``splice`` inserts one into a node's link; ``measure_rtt``/``path_record`` give the
delay a lab actually measured, which is what it records.
"""
from mininet_labs.delay.config import DelayConfig, DelayConfigError
from mininet_labs.delay.link import DelayLink, DelayLinkError, SplicedLink, netem_available, splice
from mininet_labs.delay.measure import measure_rtt, one_way, path_record
from mininet_labs.delay.netns import ROOT, NetError, Netns

__all__ = ["DelayConfig", "DelayConfigError", "DelayLink", "DelayLinkError", "NetError", "Netns", "ROOT",
           "SplicedLink", "measure_rtt", "netem_available", "one_way", "path_record", "splice"]
