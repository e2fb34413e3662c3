"""The generated Wireshark dissectors (netkv.wire.wireshark) read every golden
vector of every protocol as the Python codec decodes it, in tshark."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from netkv.cli import main
from netkv.wire import codec, layout, pcap, wireshark

from test_wire_layout import vectors

TSHARK = shutil.which("tshark")
pytestmark = pytest.mark.skipif(TSHARK is None, reason="tshark not installed "
                                "(Debian package tshark; `just system-deps` installs it)")


def _port(proto: str) -> int:
    return layout.FORMATS[codec._proto(proto)].ports[0]


def _tshark(pcap_path: Path, lua: Path | None, fields: list[str],
            env: dict[str, str] | None = None) -> list[dict[str, list[str]]]:
    cmd = [str(TSHARK), "-r", str(pcap_path), "-T", "json"]
    if lua is not None:
        cmd += ["-X", f"lua_script:{lua}"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
    return [p["_source"]["layers"] for p in json.loads(out)]


def _all_fields() -> list[str]:
    names = {f"netkv_{fmt.name}.{f.name}" for fmt in layout.FORMATS.values() for f in fmt.fields}
    return sorted(names) + ["_ws.expert.message"]


def _as(raw: str, like: int | bytes) -> int | bytes:
    if raw == "<MISSING>":
        return b""
    if isinstance(like, bytes):
        return bytes.fromhex(raw.replace(":", ""))
    return int(raw, 0)


def _capture(tmp_path: Path, vecs: list[dict]) -> Path:
    path = tmp_path / "vectors.pcap"
    pcap.write(path, [(i * 1000, pcap.udp_frame(4, 0, 40000, _port(v["proto"]),
                                                bytes.fromhex(v["hex"])))
                      for i, v in enumerate(vecs)])
    return path


def tshark_vs_codec(vec: dict, layers: dict[str, list[str]]) -> dict[str, object]:
    """Fields where tshark's reading differs from the codec's decode."""
    proto = codec._proto(vec["proto"])
    fmt = layout.FORMATS[proto]
    data = bytes.fromhex(vec["hex"])
    parsed = layout.parse(proto, data)
    msg = codec.decode(proto, data)
    diff: dict[str, object] = {}
    if "_ws.expert.message" in layers:
        diff["expert"] = layers["_ws.expert.message"]
    for f in fmt.fields:
        if f.msg is None or f.name not in parsed.fields:
            continue
        if f.msg_ops is not None and parsed.op not in f.msg_ops:
            continue
        key = f"netkv_{fmt.name}.{f.name}"
        if key not in layers:
            diff[f.name] = "missing"
            continue
        like = parsed.value(f.name)
        got = _as(layers[key][0], like)
        if f.msg_prefix is not None:
            got = bytes(got)[:msg.key_len]  # type: ignore[arg-type]
        elif f.msg == "value" and f.pad > 1:
            got = bytes(got)[:msg.value_len]  # type: ignore[arg-type]
        want = layout.msg_attr(msg, f.msg, like)
        if got != want:
            diff[f.name] = (got, want)
    return diff


def _other_magic(vec: dict) -> bool:
    """Plain and Pegasus share UDP 5047: the other one's magic is a valid packet
    of the other protocol on the wire, and the dissector reads it as such."""
    return int(vec["hex"][:4], 16) in (codec.PLAIN_MAGIC, codec.PEGASUS_MAGIC) and \
        vec["error"] == "EMAGIC"


def test_tshark_reads_every_golden_vector_as_the_codec(tmp_path: Path) -> None:
    lua = tmp_path / "netkv.lua"
    lua.write_text(wireshark.lua_source())
    vecs = vectors()
    layers = _tshark(_capture(tmp_path, vecs), lua, _all_fields())
    assert len(layers) == len(vecs)
    checked = 0
    for vec, got in zip(vecs, layers):
        if "fields" in vec:
            assert tshark_vs_codec(vec, got) == {}, vec["name"]
            checked += 1
        elif vec["error"] in ("ETRUNC", "ELEN", "EMAGIC", "EOP") and not _other_magic(vec):
            assert "_ws.expert.message" in got, f"{vec['name']}: not flagged malformed"
    assert checked == sum("fields" in v for v in vecs) >= 7 * 9


def test_a_wrong_dissector_is_caught(tmp_path: Path) -> None:
    """The comparison can fail: a dissector reading Pegasus' ver one byte late."""
    lua = tmp_path / "netkv.lua"
    lua.write_text(wireshark.lua_source().replace(
        '{name="load", type="u16"', '{name="load", type="u8"', 1))
    vec = next(v for v in vectors() if v["proto"] == "plain" and "fields" in v)
    layers = _tshark(_capture(tmp_path, [vec]), lua, _all_fields())
    assert tshark_vs_codec(vec, layers[0]) != {}


def test_install_puts_the_plugin_where_tshark_finds_it(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / ".config")}
    old = os.environ.copy()
    os.environ.update(env)
    try:
        assert main(["wireshark"]) == 0
    finally:
        os.environ.clear()
        os.environ.update(old)
    installed = list(tmp_path.rglob(wireshark.PLUGIN_NAME))
    assert len(installed) == 1
    vec = next(v for v in vectors() if v["proto"] == "pegasus" and "fields" in v)
    layers = _tshark(_capture(tmp_path, [vec]), None, ["netkv_pegasus.req_id"], env=env)
    assert layers[0]["netkv_pegasus.req_id"] == [str(vec["fields"]["req_id"])]


@pytest.mark.parametrize("below", ["", "sub"])
def test_install_into_a_file_is_one_line(below: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`wireshark --dir FILE` ended in a FileExistsError traceback."""
    afile = tmp_path / "afile"
    afile.write_text("")
    dest = afile / below if below else afile
    assert main(["wireshark", "--dir", str(dest)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"netkv: wireshark: cannot write netkv.lua into --dir '{dest}': ")
    assert err.endswith("(allowed: a folder you can write)") and "\n" not in err
