"""Wireshark/tshark dissectors for every netkv wire format, generated from
``netkv.wire.layout`` (the layout the codec is checked against), and their
installation: ``python -m netkv wireshark`` writes ``netkv.lua`` into the
user's personal Lua plugin folder (``tshark -G folders`` names it).

The Lua is one data table (the layout) plus one generic walker that reads it
the way ``layout.parse`` does, so adding a format to the layout adds its
dissector.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from netkv.wire.layout import FORMATS, REST, Field, Format

PLUGIN_NAME = "netkv.lua"


def _lua_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _lua_map(d: dict[int, str]) -> str:
    return "{" + ", ".join(f"[{k}]={_lua_str(v)}" for k, v in sorted(d.items())) + "}"


def _lua_list(items: tuple[str, ...] | None) -> str:
    return "nil" if items is None else "{" + ", ".join(f"[{_lua_str(i)}]=true"
                                                      for i in items) + "}"


def _lua_field(f: Field) -> str:
    length = (_lua_str(f.length) if isinstance(f.length, str) else str(f.length))
    parts = [
        f"name={_lua_str(f.name)}", f"type={_lua_str(f.type)}", f"length={length}",
        f"label={_lua_str(f.label or f.name)}", f"hex={'true' if f.base == 'hex' else 'false'}",
        f"pad={f.pad}", f"zero={'true' if f.zero else 'false'}",
        f"max={'nil' if f.max is None else f.max}", f"ops={_lua_list(f.ops)}",
        f"names={_lua_map(f.names) if f.names else 'nil'}",
        f"bits={_lua_map(f.bits) if f.bits else 'nil'}",
    ]
    return "{" + ", ".join(parts) + "}"


def _lua_format(fmt: Format) -> str:
    fields = ",\n      ".join(_lua_field(f) for f in fmt.fields)
    return (
        f"  {{name={_lua_str(fmt.name)}, title={_lua_str(fmt.title)}, "
        f"magic={'nil' if fmt.magic is None else fmt.magic},\n"
        f"    ports={{{', '.join(str(p) for p in fmt.ports)}}},\n"
        f"    ops={_lua_map(fmt.op_names())},\n"
        f"    fields={{\n      {fields}}}}}"
    )


_WALKER = r"""
local REST = "%(rest)s"
local WIDTH = {u8=1, u16=2, u32=4, u64=8}
local PF = {u8=ProtoField.uint8, u16=ProtoField.uint16, u32=ProtoField.uint32,
            u64=ProtoField.uint64}

local by_port = {}

for _, fmt in ipairs(FORMATS) do
  local p = Proto("netkv_" .. fmt.name, "netkv " .. fmt.title)
  fmt.proto = p
  fmt.pf = {}
  local list = {}
  for _, f in ipairs(fmt.fields) do
    if not fmt.pf[f.name] then
      local abbr = "netkv_" .. fmt.name .. "." .. f.name
      local pf
      if f.type == "bytes" then
        pf = ProtoField.bytes(abbr, f.label)
      else
        local names = f.names
        if f.name == "op" then names = fmt.ops end
        pf = PF[f.type](abbr, f.label, f.hex and base.HEX or base.DEC, names)
      end
      fmt.pf[f.name] = pf
      list[#list + 1] = pf
      if f.bits then
        f.bitpf = {}
        for bit, bname in pairs(f.bits) do
          local bpf = ProtoField.bool(abbr .. "." .. string.lower(bname), bname,
                                      8 * WIDTH[f.type], nil, bit)
          f.bitpf[#f.bitpf + 1] = bpf
          list[#list + 1] = bpf
        end
      end
    end
  end
  p.fields = list
  fmt.bad = ProtoExpert.new("netkv_" .. fmt.name .. ".malformed",
                            "malformed " .. fmt.title .. " payload",
                            expert.group.MALFORMED, expert.severity.ERROR)
  p.experts = {fmt.bad}
  for _, port in ipairs(fmt.ports) do
    by_port[port] = by_port[port] or {}
    table.insert(by_port[port], fmt)
  end
end

local function dissect(fmt, tvb, pinfo, tree)
  local len = tvb:len()
  pinfo.cols.protocol = fmt.title
  local top = tree:add(fmt.proto, tvb(), "netkv " .. fmt.title)
  local vals, problems, op = {}, {}, nil
  local off = 0
  local complete = true
  for _, f in ipairs(fmt.fields) do
    if f.ops == nil or (op ~= nil and f.ops[op]) then
      local n
      if f.type ~= "bytes" then
        n = WIDTH[f.type]
      elseif f.length == REST then
        n = len - off
      elseif type(f.length) == "string" then
        n = 1
        for ref in string.gmatch(f.length, "[^*]+") do n = n * (vals[ref] or 0) end
      else
        n = f.length
      end
      n = math.floor((n + f.pad - 1) / f.pad) * f.pad
      if off + n > len then
        problems[#problems + 1] = "truncated in " .. f.name
        complete = false
        break
      end
      local item
      if n == 0 then
        item = top:add(fmt.pf[f.name], tvb(off, 0))
      else
        item = top:add(fmt.pf[f.name], tvb(off, n))
      end
      if f.type ~= "bytes" then
        local v
        if n == 8 then v = tvb(off, n):uint64() else v = tvb(off, n):uint() end
        vals[f.name] = v
        if f.name == "magic" and fmt.magic and v ~= fmt.magic then
          problems[#problems + 1] = string.format("magic 0x%%04x", v)
        end
        if f.name == "op" then
          op = fmt.ops[v]
          if op == nil then problems[#problems + 1] = "unknown op " .. tostring(v) end
        end
        if f.max and v > f.max then
          problems[#problems + 1] = f.name .. " " .. tostring(v) .. " > " .. f.max
        end
        if f.bitpf then
          for _, bpf in ipairs(f.bitpf) do item:add(bpf, tvb(off, n)) end
        end
      end
      if f.zero then
        for i = 0, n - 1 do
          if tvb(off + i, 1):uint() ~= 0 then
            problems[#problems + 1] = f.name .. " not zero"
            break
          end
        end
      end
      off = off + n
    end
  end
  if complete and off < len then
    problems[#problems + 1] = (len - off) .. " trailing bytes"
  end
  local info = op or "?"
  for _, k in ipairs({"client_id", "req_id", "seq", "id", "server_id", "parid", "ver"}) do
    if vals[k] ~= nil and fmt.pf[k] then info = info .. " " .. k .. "=" .. tostring(vals[k]) end
  end
  pinfo.cols.info = info
  for _, text in ipairs(problems) do top:add_proto_expert_info(fmt.bad, text) end
  return len
end

for port, fmts in pairs(by_port) do
  local first = fmts[1]
  local function pick(tvb)
    if #fmts > 1 and tvb:len() >= 2 then
      local m = tvb(0, 2):uint()
      for _, f in ipairs(fmts) do if f.magic == m then return f end end
    end
    return first
  end
  local d = Proto("netkv_port_" .. port, "netkv UDP " .. port)
  d.dissector = function(tvb, pinfo, tree)
    local fmt = pick(tvb)
    return dissect(fmt, tvb, pinfo, tree)
  end
  DissectorTable.get("udp.port"):add(port, d)
end
for _, fmt in ipairs(FORMATS) do
  fmt.proto.dissector = function(tvb, pinfo, tree) return dissect(fmt, tvb, pinfo, tree) end
end
"""


def lua_source() -> str:
    """The dissector plugin, generated from the layout."""
    formats = ",\n".join(_lua_format(f) for f in FORMATS.values())
    return (
        "-- netkv wire formats for Wireshark/tshark. Generated by netkv.wire.wireshark\n"
        "-- from netkv/wire/layout.py: do not edit; `python -m netkv wireshark` rewrites it.\n"
        f"local FORMATS = {{\n{formats}\n}}\n" + _WALKER % {"rest": REST}
    )


def plugin_dir() -> Path:
    """The user's personal Lua plugin folder: tshark's own answer when tshark
    is installed, else Wireshark's default (~/.local/lib/wireshark/plugins)."""
    tshark = shutil.which("tshark")
    if tshark:
        out = subprocess.run([tshark, "-G", "folders"], capture_output=True, text=True,
                             env={**os.environ, "LC_ALL": "C"}, check=False).stdout
        m = re.search(r"^Personal Lua Plugins:\s*(.+)$", out, re.M)
        if m:
            return Path(m.group(1).strip())
    return Path.home() / ".local" / "lib" / "wireshark" / "plugins"


def install(dest: Path | None = None) -> Path:
    """Write netkv.lua into dest (default: plugin_dir()); returns the file."""
    folder = dest if dest is not None else plugin_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / PLUGIN_NAME
    path.write_text(lua_source())
    return path
