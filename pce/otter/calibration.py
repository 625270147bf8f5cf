"""The OTTER scenario's unpublished knobs, as fitted to the paper (no imports: the CLI's help
text states them without loading numpy).

The paper gives per-path throughput and edge resources (Table 4) but no link capacities, and its
edge resources taken literally hold almost no flows. Three knobs of
:func:`pce.otter.scenario.generate_network` are therefore fitted to the paper's published
baseline columns (Table 7), never to the policy under test; ``generate_network`` itself keeps
the uncalibrated defaults (capacity 1, shared 0.5, edge 1).

- §3 of docs/performance/pce-otter.md: ``capacity_factor`` (link = factor × sampled path
  throughput) and ``shared_factor`` (access link = factor × the sum over its paths), least
  squares to GREEDY's .64/.55/.44 at 20K/30K/40K flows/s (bench/otter_calibrate.py).
- §4: ``edge_factor`` (edge-site CPU/RAM/disk = factor × Table 4's ranges), with the link knobs
  refitted at each value, least squares to GREEDY and OPT (.96/.87/.70)
  (bench/otter_calibrate_edge.py).
"""

CALIBRATED_CAPACITY_FACTOR = 1.95
CALIBRATED_SHARED_FACTOR = 0.4
CALIBRATED_EDGE_FACTOR = 30.0
