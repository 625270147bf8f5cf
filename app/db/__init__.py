"""mlte's database: one schema for every table, owned by the Alembic migrations in ``migrations/``.

``models`` (the declarations), ``engine`` (engines, sessions, the write lock), ``migrate`` (upgrade to
head), ``states`` and ``lifecycle`` (the reservation life cycle both the web service and the controller
apply), ``provisioning`` (the controller's interface), ``fencing`` (several controllers: a deposed
leader's writes are refused). No Flask, no os-ken: docs/database.md.
"""
