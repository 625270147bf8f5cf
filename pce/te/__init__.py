"""WAN traffic-engineering LPs (MLU, total flow; path, edge and POP-partitioned) on real topologies.

Entry point: :func:`pce.te.solve.solve_te`; CLI: ``mlte pce te`` (pce/cli_te.py); docs/te.md.
"""
