"""A protocol's setting (conf/setting/<name>.yaml): the paper's rack and
workload where netkv's defaults would not run the protocol or not exercise
it, applied under the command line (docs/configuration.md)."""

from __future__ import annotations

import pytest

from netkv.config.compose import load
from netkv.config.core import conf_dir, group_options
from netkv.config.setting import SETTING_GROUP, kept, notice, setting_of


def dump(*overrides: str) -> dict:
    return load([*overrides, "out=x"]).model_dump(mode="json")


@pytest.mark.parametrize("protocol", group_options("protocol"))
def test_every_protocol_runs_with_nothing_else_set(protocol: str) -> None:
    """`python -m netkv run protocol=<p>` validates for every protocol (NetLR
    did not: netkv's 16 servers exceed its 8 replicas, exit 2)."""
    cfg = load([f"protocol={protocol}", "out=x"])
    assert cfg.protocol.name == protocol
    assert cfg.servers <= cfg.protocol.max_servers


def test_netlr_gets_its_papers_rack_and_writes() -> None:
    cfg = dump("protocol=netlr")
    assert (cfg["servers"], cfg["topology"]["servers"]) == (4, 4)
    assert (cfg["write_ratio"], cfg["workload"]["write_ratio"]) == (0.05, 0.05)


def test_netmc_gets_multigets_and_a_reference_that_has_them() -> None:
    cfg = dump("protocol=netmc")
    assert cfg["topology"]["servers"] == 5
    assert cfg["workload"]["multiget"]["mean"] == 8.6
    assert cfg["slo"]["reference"] == "netmc"


def test_the_command_line_wins() -> None:
    cfg = dump("protocol=netlr", "servers=6", "write_ratio=0.2")
    assert (cfg["topology"]["servers"], cfg["workload"]["write_ratio"]) == (6, 0.2)
    cfg = dump("protocol=netmc", "workload.multiget.mean=1", "slo.reference=self")
    assert (cfg["workload"]["multiget"]["mean"], cfg["slo"]["reference"]) == (1.0, "self")


def test_a_group_choice_keeps_the_setting() -> None:
    """The protocol composes after the groups: choosing another workload or
    SLO keeps the setting's values in them."""
    cfg = dump("protocol=netmc", "workload=uniform", "slo=fixed")
    assert cfg["workload"]["multiget"]["mean"] == 8.6
    assert cfg["slo"]["reference"] == "netmc"


@pytest.mark.parametrize("protocol", ["hash", "pegasus", "netcache", "kvswitch", "starcache"])
def test_a_protocol_without_a_setting_keeps_netkvs_defaults(protocol: str) -> None:
    assert setting_of(protocol) == {}
    cfg = dump(f"protocol={protocol}")
    assert (cfg["servers"], cfg["write_ratio"]) == (16, 0.0)
    assert (cfg["workload"]["multiget"]["mean"], cfg["slo"]["reference"]) == (1.0, "hash")


def test_every_setting_is_its_protocols_and_every_value_lands() -> None:
    """Each setting file belongs to a protocol whose file pulls it in, and each
    of its values is in that protocol's resolved config (a misspelled key is
    refused by the schema; one the root or a group overrides after it fails
    here)."""
    settings = sorted(p.stem for p in (conf_dir() / SETTING_GROUP).glob("*.yaml"))
    assert settings == ["netlr", "netmc"]
    for name in settings:
        text = (conf_dir() / "protocol" / f"{name}.yaml").read_text(encoding="utf-8")
        assert f"/{SETTING_GROUP}/{name}@_global_" in text
        assert kept(name, dump(f"protocol={name}")) == setting_of(name)


def test_the_notice_names_only_the_values_kept() -> None:
    line = notice("netlr", dump("protocol=netlr"))
    assert line is not None and "servers=4, write_ratio=0.05" in line
    line = notice("netlr", dump("protocol=netlr", "servers=6"))
    assert line is not None and "servers" not in line and "write_ratio=0.05" in line
    assert notice("netlr", dump("protocol=netlr", "servers=6", "write_ratio=0")) is None
    assert notice("hash", dump("protocol=hash")) is None


def test_list_shows_each_setting(capsys: pytest.CaptureFixture[str]) -> None:
    from netkv.cli import main

    assert main(["list", "protocol"]) == 0
    lines = {ln.split()[0]: ln for ln in capsys.readouterr().out.splitlines()[1:]}
    assert lines["netlr"].endswith("[setting: servers=4 write_ratio=0.05]")
    assert "setting" not in lines["hash"]


def test_the_notice_reads_the_values_the_run_uses() -> None:
    """A group key set apart from its shortcut (topology.servers=8 beside
    servers: 4) is what the run uses: not reported as the setting's."""
    line = notice("netlr", dump("protocol=netlr", "topology.servers=8"))
    assert line is not None and "servers" not in line
    assert notice("netlr", dump("protocol=netlr", "topology.servers=8",
                                "workload.write_ratio=0")) is None


def test_a_refusal_of_a_setting_value_names_the_setting() -> None:
    """Values the user never typed: the one-line error says where they came
    from, from the schema and from a target's check alike (same class,
    same exit code); a refusal of something else does not."""
    from netkv.config.core import ConfigError
    from netkv.runner import check_combination
    from netkv.targets.base import TargetUnavailable

    with pytest.raises(ConfigError) as exc:
        load(["protocol=netmc", "workload.multiget.max_keys=4", "out=x"])
    assert str(exc.value).startswith("invalid config: workload.multiget.mean = 8.6")
    assert str(exc.value).endswith("(conf/setting/netmc.yaml): set them on the command line]")
    with pytest.raises(TargetUnavailable) as exc2:
        check_combination(load(["protocol=netmc", "target=mininet", "record_history=true",
                                "out=x"]))
    assert "netmc's setting gave" in str(exc2.value) and str(exc2.value).count("setting gave") == 1
    with pytest.raises(ConfigError) as exc3:
        load(["protocol=netmc", "alpha=-1", "out=x"])
    assert "setting" not in str(exc3.value)
    with pytest.raises(ConfigError) as exc4:   # the user's own value: nothing to name
        load(["protocol=netlr", "servers=40", "out=x"])
    assert "setting" not in str(exc4.value)
