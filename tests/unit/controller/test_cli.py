"""`mlte controller` / `mlte lab` argument handling (no network, no root needed)."""
import pytest

from app.cli.main import build_parser, main


def test_lab_and_controller_options_parse():
    args = build_parser().parse_args(["lab", "testbed", "--discover", "--out", "o", "--circuit", "initial"])
    assert args.name == "testbed" and args.discover and args.circuit == "initial" and not args.no_static
    args = build_parser().parse_args(["controller", "--of-port", "16653", "--api-port", "18181", "--app", "m.a"])
    assert (args.of_port, args.api_port, args.app) == (16653, 18181, ["m.a"])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["lab", "testbed", "--static-file", "f", "--no-static"])


def test_lab_needs_root(monkeypatch, capsys):
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert main(["lab", "testbed", "--discover"]) == 2
    assert "needs root" in capsys.readouterr().err


def test_controller_names_file_errors_are_one_line(tmp_path, capsys):
    bad = tmp_path / "names.json"
    bad.write_text("{not json")
    assert main(["controller", "--names", str(bad)]) == 2
    assert "--names" in capsys.readouterr().err


def test_bad_ports_and_output_dir_are_one_line_errors(tmp_path, monkeypatch, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["controller", "--of-port", "99999"])
    assert exit_.value.code == 2 and "out of range 1..65535" in capsys.readouterr().err
    monkeypatch.setattr("os.geteuid", lambda: 0)
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/" + name)
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["lab", "testbed", "--out", str(blocker / "out")]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "cannot create" in err and "Traceback" not in err
    assert main(["lab", "testbed", "--out", str(tmp_path / "o"), "--static-file", str(tmp_path / "none.json")]) == 2
    assert "none.json" in capsys.readouterr().err


def test_missing_app_module_is_a_one_line_error(capsys):
    from app.controller.launcher import check_app_modules
    from app.errors import ConfigError

    check_app_modules(["app.controller.topology_publisher"])
    for bad in ("no.such.module", "app.controller.nosuch", ""):
        with pytest.raises(ConfigError, match="no such module"):
            check_app_modules([bad])


@pytest.mark.parametrize("argv", [["lab", "testbed", "--unit-mbps", "nan"], ["lab", "testbed", "--unit-mbps", "-1"],
                                  ["lab", "testbed", "--timeout", "-5"], ["lab", "testbed", "--timeout", "inf"]])
def test_lab_numbers_must_be_finite_and_positive(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2 and "finite number > 0" in capsys.readouterr().err


def test_lab_passes_absolute_static_file_to_the_controller(tmp_path, monkeypatch):
    """The controller runs in the project root: a relative --static-file / OUT must not break it."""
    from mininet_labs.session import LabSession
    from topology.spec import fig2_testbed

    monkeypatch.chdir(tmp_path)
    s = LabSession(fig2_testbed(), "work", static_file="optical.json", config_file="m.toml", prefix="zz")
    assert s.static_file == str(tmp_path / "optical.json") and s.config_file == str(tmp_path / "m.toml")
    assert s.workdir == tmp_path / "work"


def test_controller_url_errors_are_one_line(capsys):
    for url in ("notaurl", "http://[::1"):
        assert main(["topology", "show", "--controller", url]) == 2
        err = capsys.readouterr().err
        assert "bad controller API URL" in err and "Traceback" not in err


def test_access_default_mbps_is_checked():
    from app.config import merge_config
    from app.errors import ConfigError

    assert merge_config({"controller": {"access_default_mbps": 100}})["controller"]["access_default_mbps"] == 100.0
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="access_default_mbps"):
            merge_config({"controller": {"access_default_mbps": bad}})
