"""``python -m ots_virtual`` argument errors are one line (exit 2), never a traceback."""
from __future__ import annotations

import pytest

from ots_virtual.__main__ import main

BASE = ["--bridge", "no-such-br", "--dpid", "1", "--ports", "1:ODU2"]


@pytest.mark.parametrize("extra,words", [
    (["--unit-mbps", "nan"], "finite"), (["--delay-min", "inf"], "finite"), (["--echo-interval", "-1"], "finite"),
    (["--listen-port", "99999"], "0..65535"), (["--controller", "h:99999"], "out of range"),
])
def test_bad_numbers_are_usage_errors(extra, words, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(BASE + extra)
    assert exit_.value.code == 2 and words in capsys.readouterr().err


def test_unwritable_log_is_a_one_line_error(capsys, tmp_path):
    assert main(BASE + ["--log", str(tmp_path / "missing" / "x.log")]) == 2
    err = capsys.readouterr().err
    assert "--log" in err and "Traceback" not in err


def test_read_timeout_must_be_positive(capsys):
    assert main(BASE + ["--read-timeout", "0"]) == 2
    assert "--read-timeout must be > 0" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(BASE + ["--read-timeout", "nan"])
    assert exit_.value.code == 2 and "finite" in capsys.readouterr().err
