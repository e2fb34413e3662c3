"""A protocol's setting: values of the rack and workload from its paper
(``conf/setting/<name>.yaml``) that its ``conf/protocol/<name>.yaml`` pulls
in under the command line, where netkv's defaults would not run the protocol
(NetLR's 8 replicas at most) or not exercise it (NetMC without multigets).

Hydra applies them: ``config.yaml`` composes itself first (``_self_``), then
the groups, the protocol last, so a setting overrides the root's shortcuts
and the workload group, and a command-line override wins over both. This
module only reads them back, to say which ones a run kept."""

from __future__ import annotations

from typing import Any

import yaml

from netkv.config.core import conf_dir

SETTING_GROUP = "setting"


def _flat(node: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(node, dict):
        return {prefix.rstrip("."): node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out.update(_flat(value, f"{prefix}{key}."))
    return out


def setting_of(protocol: str) -> dict[str, Any]:
    """The protocol's setting as dotted keys (``workload.multiget.mean``);
    empty for a protocol that has none."""
    path = conf_dir() / SETTING_GROUP / f"{protocol}.yaml"
    if not path.is_file():
        return {}
    # libyaml's loader where PyYAML has it: `list` reads these too (cli._describe)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return _flat(yaml.load(path.read_text(encoding="utf-8"), Loader=loader) or {})


def _get(data: dict[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def kept(protocol: str, resolved: dict[str, Any]) -> dict[str, Any]:
    """The setting's values that ``resolved`` (a validated config's dump)
    still holds: those the command line did not change."""
    return {key: value for key, value in setting_of(protocol).items()
            if _get(resolved, key) == value}


def notice(protocol: str, resolved: dict[str, Any]) -> str | None:
    """One line naming the setting's values a run kept, or None."""
    held = kept(protocol, resolved)
    if not held:
        return None
    values = ", ".join(f"{k}={v}" for k, v in held.items())
    return (f"{protocol}'s setting (conf/{SETTING_GROUP}/{protocol}.yaml): {values} "
            f"(set them on the command line to change them)")
