"""app.update is a plain library: importing it loads neither os-ken nor Flask (nor eventlet)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_update_package_imports_no_controller_framework():
    code = ("import sys, app.update, app.update.executor, app.update.planner; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('os_ken', 'flask', 'eventlet')); "
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[3])
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
