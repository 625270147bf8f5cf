import subprocess
import sys


def test_library_imports_no_controller_or_web():
    code = ("import sys, pce.otter, pce.otter.sim, pce.cli_otter; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('os_ken', 'flask', 'app')]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
