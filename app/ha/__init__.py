"""Several controllers, one leader: the election through etcd and a local etcd for labs and tests.

Plain Python (no os-ken, no controller imports): the controller wires :func:`app.ha.election.run`
into a greenthread and asks :meth:`app.ha.election.Election.is_leader` before it sends anything.
"""
