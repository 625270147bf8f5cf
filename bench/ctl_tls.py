"""OpenFlow over TLS on vs off (issue 24 target: < 10 % cost): ``bench/ctl_updates.py --tls-compare``,
so ``make bench-ctl`` (``bench/run.py ctl``) records it in ``bench/results/ctl_tls.json``.

    sudo .venv/bin/python bench/ctl_tls.py --json bench/results/ctl_tls.json [--quick] [--rounds N]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ctl_updates  # noqa: E402

if __name__ == "__main__":
    sys.argv[1:1] = ["--tls-compare"]
    sys.exit(ctl_updates.main())
