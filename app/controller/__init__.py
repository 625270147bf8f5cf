"""The mlte controller: one os-ken process driving OF1.3 packet switches and OF1.0 OTS nodes.

Only the app modules (``inventory``, ``lldp``, ``forwarding``, ``ots_driver``, ``control_api``) and
``launcher`` touch os-ken; ``model``, ``links``, ``paths`` and ``scan`` are plain logic that unit
tests import without a switch.
"""
