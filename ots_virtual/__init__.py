"""mlte's virtual Open Transport Switch: an OpenFlow 1.0 agent that turns an OVS bridge into a circuit switch.

Modules: ``agent`` (OtsAgent: the process), ``rules`` (pure XCON checks), ``protocol`` (controller-side
helpers for the capabilities VENDOR message), ``of10`` (wire helpers), ``ovs`` (the bridge underneath),
``granularity`` (ODU sizes), ``light`` (pure loss-of-light decisions), ``roles`` (Nicira controller roles
and mlte's generation id), ``upstream`` (controller targets, TLS, the per-session channel).
User documentation: docs/ots.md.
"""
