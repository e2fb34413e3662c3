"""A protocol's setting: values of the rack and workload from its paper
(``conf/setting/<name>.yaml``) that its ``conf/protocol/<name>.yaml`` pulls
in under the command line, where netkv's defaults would not run the protocol
(NetLR's 8 replicas at most) or not exercise it (NetMC without multigets).

Hydra applies them: ``config.yaml`` composes itself first (``_self_``), then
the groups, the protocol last, so a setting overrides the root's shortcuts
and the groups, and a command-line override wins over both. This module
only reads them back: to say which ones a run kept, and to name the setting
in a refusal of one of its values."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import yaml

from netkv.config.core import ConfigError, conf_dir

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


# root shortcuts and the group keys made of them (conf/config.yaml): a run
# uses the group's, which the command line may set apart from the shortcut
SHORTCUTS = {"servers": "topology.servers", "clients": "topology.clients",
             "write_ratio": "workload.write_ratio", "alpha": "workload.alpha",
             "keys": "workload.keys"}


def kept(protocol: str, resolved: dict[str, Any]) -> dict[str, Any]:
    """The setting's values that ``resolved`` (a config's dump) still holds
    where the run reads them: those the command line did not change."""
    return {key: value for key, value in setting_of(protocol).items()
            if _get(resolved, key) == value
            and (key not in SHORTCUTS or _get(resolved, SHORTCUTS[key]) == value)}


def hint(resolved: dict[str, Any], message: str) -> str:
    """``message`` (a refusal of the config ``resolved``), with the setting
    named when it speaks of a value the protocol's setting gave: the user
    never typed it."""
    protocol = _get(resolved, "protocol.name")
    held = kept(protocol, resolved) if isinstance(protocol, str) else {}
    if f"(conf/{SETTING_GROUP}/" in message:
        return message   # named already (a check inside another)
    words = set()
    for key in held:
        parts = key.split(".")
        # workload.multiget.mean: also "multiget(s)", as a target's refusal says
        words.update({key, SHORTCUTS.get(key, key), *(parts[-2:-1] if len(parts) > 2 else [])})
    if not any(re.search(rf"\b{re.escape(w)}", message) for w in words):
        return message
    values = ", ".join(f"{k}={v}" for k, v in held.items())
    return (f"{message} [{protocol}'s setting gave {values} (conf/{SETTING_GROUP}/"
            f"{protocol}.yaml): set them on the command line]")


def notice(protocol: str, resolved: dict[str, Any]) -> str | None:
    """One line naming the setting's values a run kept, or None."""
    held = kept(protocol, resolved)
    if not held:
        return None
    values = ", ".join(f"{k}={v}" for k, v in held.items())
    return (f"{protocol}'s setting (conf/{SETTING_GROUP}/{protocol}.yaml): {values} "
            f"(set them on the command line to change them)")


@contextmanager
def setting_named(resolved: dict[str, Any]) -> Iterator[None]:
    """Re-raise a ConfigError of the config ``resolved`` with ``hint``'s
    words, as the same class (its exit code)."""
    try:
        yield
    except ConfigError as exc:
        message = hint(resolved, str(exc))
        if message == str(exc):
            raise
        raise type(exc)(message) from None
