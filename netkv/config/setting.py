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

from netkv.config.core import SHORTCUTS, ConfigError, conf_dir, flatten

SETTING_GROUP = "setting"


def setting_of(protocol: str) -> dict[str, Any]:
    """The protocol's setting as dotted keys (``workload.multiget.mean``);
    empty for a protocol that has none."""
    path = conf_dir() / SETTING_GROUP / f"{protocol}.yaml"
    if not path.is_file():
        return {}
    # libyaml's loader where PyYAML has it: `list` reads these too (cli._describe)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return flatten(yaml.load(path.read_text(encoding="utf-8"), Loader=loader) or {})


def kept(protocol: str, resolved: dict[str, Any]) -> dict[str, Any]:
    """The setting's values that ``resolved`` (a config's dump) still holds
    where the run reads them: those the command line did not change."""
    flat = flatten(resolved)
    return {key: value for key, value in setting_of(protocol).items()
            if flat.get(key) == value
            and (key not in SHORTCUTS or flat.get(SHORTCUTS[key]) == value)}


def described(values: dict[str, Any], sep: str = ", ") -> str:
    """``key=value`` pairs, as the notice, a refusal and ``list`` show them."""
    return sep.join(f"{k}={v}" for k, v in values.items())


def hint(resolved: dict[str, Any], message: str) -> str:
    """``message`` (a refusal of the config ``resolved``), with the setting
    named when it speaks of a value the protocol's setting gave: the user
    never typed it."""
    protocol = (resolved.get("protocol") or {}).get("name")
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
    return (f"{message} [{protocol}'s setting gave {described(held)} (conf/{SETTING_GROUP}/"
            f"{protocol}.yaml): set them on the command line]")


def notice(protocol: str, resolved: dict[str, Any]) -> str | None:
    """One line naming the setting's values a run kept, or None."""
    held = kept(protocol, resolved)
    if not held:
        return None
    return (f"{protocol}'s setting (conf/{SETTING_GROUP}/{protocol}.yaml): {described(held)} "
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
