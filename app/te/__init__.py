"""The elastic TE loop's decisions (plain code: no os-ken, no Flask).

``gain``: is a move worth its switch-over (OSCARS-TE §IV: a flow is offloaded only if what it still
has to send finishes sooner on the new path, switching time included); ``damping``: minimum hold
time per flow, a cap on moves per interval, hysteresis.
"""
