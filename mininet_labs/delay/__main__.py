"""``python -m mininet_labs.delay build``: compile the C tools now (bootstrap does, so labs need not);
``python -m mininet_labs.delay netem``: say whether this kernel has netem (exit 0 yes, 1 no)."""
from __future__ import annotations

import sys

from mininet_labs.delay.build import TOOLS, BuildError, ensure_binary


def main(argv: list[str]) -> int:
    if argv == ["build"]:
        try:
            for tool in TOOLS:
                print(ensure_binary(tool))
        except BuildError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        return 0
    if argv == ["netem"]:
        from mininet_labs.delay.link import netem_available

        have = netem_available()
        print("netem: available" if have else "netem: not in this kernel (labs use the dlyfwd element)")
        return 0 if have else 1
    print("usage: python -m mininet_labs.delay build|netem", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
