"""The one-line refusals of a config: what Hydra, OmegaConf and pydantic
raise, worded as ``invalid config: <key> = <value> (allowed: ...)`` with the
key, the value and what is allowed (merge clashes, list entries, unknown
keys, group choices). netkv.config.compose raises them as ConfigError.
"""

from __future__ import annotations

import re
from typing import Any, get_args, get_origin

from hydra import compose, initialize_config_dir
from hydra.core.override_parser.types import Override
from hydra.errors import OverrideParseException
from omegaconf import DictConfig, ListConfig
from pydantic import BaseModel, ValidationError

from netkv.config.core import CONFIG_NAME, GROUPS, ConfigError, conf_dir, group_options
from netkv.config.schema import RunConfig
from netkv.protocols import names as protocol_names

JOBS_ALLOWED = "a nonzero integer, jobs at once; -1: one per core"


_ALLOWED = {
    "greater_than_equal": "a number >= {ge}",
    "greater_than": "a number > {gt}",
    "less_than_equal": "a number <= {le}",
    "less_than": "a number < {lt}",
    "float_parsing": "a number",
    "float_type": "a number",
    "int_parsing": "an integer",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "bool_parsing": "true or false",
    "bool_type": "true or false",
    "string_type": "a string",
    "string_too_short": "a non-empty string",
    "missing": "a value (the key is required)",
    "finite_number": "a finite number",
    "string_too_long": "a string of at most {max_length} characters",
    "string_pattern_mismatch": "one path component of letters, digits and _.,+=@%-",
    "too_short": "at least {min_length} item(s)",
    "too_long": "at most {max_length} items",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def check_group_choices(overrides: list[str]) -> None:
    """A group takes one option's name: Hydra merged a list of them silently
    (protocol=[hash,pegasus] ran Pegasus) and named no key for an empty, null
    or numeric choice."""
    for o in _parsed(overrides):   # unparsable: compose says it, with Hydra's words
        if o.key_or_group not in GROUPS or o.is_delete() or o.is_sweep_override():
            continue
        if not isinstance(o.value(), str) or not o.value():
            text = (o.input_line or "").partition("=")[2] or "''"
            raise ConfigError(_not_an_option(o.key_or_group, text))


def _hint(text: str) -> str:
    """What is allowed, where Hydra says it on the lines first_line drops: a
    comma list without -m ("Ambiguous value"): one value, or a sweep."""
    if text.startswith("Ambiguous value for argument"):
        return " (allowed: one value, or a sweep of each with run -m)"
    return ""


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def _lookup(data: Any, loc: tuple[Any, ...]) -> Any:
    node = data
    for part in loc:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            return None
    return node


def _range_text(err: dict[str, Any], ctx: dict[str, Any]) -> str:
    kind = err["type"]
    template = _ALLOWED.get(kind)
    if template is not None:
        return template.format(**ctx)
    if kind == "literal_error":
        return "one of " + ctx.get("expected", "?").replace("'", "")
    return first_line(err["msg"])


def describe_validation_error(exc: ValidationError, data: dict[str, Any]) -> str:
    errors = exc.errors(include_url=False)
    # A discriminated union reports its tag first; an out-of-range model
    # validator message already names its key.
    err = _relevant_error(errors, data)
    loc = _plain_loc(err["loc"])
    key = ".".join(str(p) for p in loc) or "config"
    ctx = {k: v for k, v in (err.get("ctx") or {}).items()}
    if err["type"] == "value_error":
        msg = str(ctx.get("error", err["msg"]))
        # a field validator's message says what is wrong, not where: name the
        # key (a model validator's names its fields itself)
        if loc and not isinstance(err.get("input"), dict) and not msg.startswith(key):
            return f"invalid config: {key} = {err.get('input')!r}: {msg}"
        return f"invalid config: {msg}"
    if err["type"] == "extra_forbidden":
        parent = _lookup(data, loc[:-1])
        model_keys = sorted(k for k in (parent or {}) if k != loc[-1])
        where = ".".join(str(p) for p in loc[:-1])
        under = f" under {where}" if where else ""
        return f"invalid config: unknown key '{key}' (allowed keys{under}: {', '.join(model_keys)})"
    if err["type"] == "missing":   # its "input" is the mapping it is missing from
        return f"invalid config: {key} is missing (allowed: {_range_text(err, ctx)})"
    value = err.get("input", _lookup(data, loc))
    return f"invalid config: {key} = {value!r} (allowed: {_range_text(err, ctx)})"


# the protocol union's tags (pydantic puts the chosen one in an error's loc)
_UNION_TAGS: frozenset[str] = frozenset(protocol_names())


def _is_union_member(part: Any) -> bool:
    # a plain union (``int | list[...]``) names its members in the location
    return isinstance(part, str) and (part in _UNION_TAGS or part in _MEMBER_TAGS
                                      or part.startswith(("list[", "constrained-")))


_MEMBER_TAGS = frozenset({"int", "float", "str", "bool", "none"})


def _plain_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(p for p in loc if not _is_union_member(p))


def _relevant_error(errors: list[Any], data: dict[str, Any]) -> Any:
    """The first error, but for a value that failed every member of a plain
    union, the member matching the value's kind (a list -> the list member)."""
    err = errors[0]
    members = [p for p in err["loc"] if _is_union_member(p) and p not in _UNION_TAGS]
    if not members:
        return err
    value = _lookup(data, _plain_loc(err["loc"]))
    want_list = isinstance(value, list)
    for other in errors:
        tags = [p for p in other["loc"] if _is_union_member(p) and p not in _UNION_TAGS]
        if tags and any(str(t).startswith("list[") for t in tags) == want_list:
            return other
    return err


def _not_an_option(group: str, shown: str) -> str:
    article = "an" if group[:1] in "aeiou" else "a"   # "an inventory"
    return (f"invalid config: {group} = {shown} is not {article} {group} "
            f"(choose one of: {', '.join(group_options(group))}{_switch_hint(group, shown)})")


def _switch_hint(group: str, shown: str) -> str:
    """target=bmv2 (or tofino): the switch back-end named as a target."""
    from netkv.backends import BACKENDS

    name = shown.strip("'")
    entry = BACKENDS.get(name) if group == "target" else None
    if entry is None:
        return ""
    return (f"; {name} is a switch back-end: target={'|'.join(entry.placements)} "
            f"target.switch={name}")


def missing_option_message(text: str) -> str:
    match = re.search(r"Could not find '([^/']+)/([^']+)'", text)
    if match:
        group, option = match.groups()
        return _not_an_option(group, f"'{option}'")
    match = re.search(r"Could not load '([^']+)'", text)
    if match:
        return f"invalid config: no such config '{match.group(1)}'"
    return f"invalid config: {first_line(text)}"


def composition_message(text: str, cause: BaseException | None, overrides: list[str]) -> str:
    match = re.search(r"Could not override '([^']+)'", text)
    if match:
        key = match.group(1)
        if key in GROUPS:   # a group given a mapping, not an option's name
            return _not_an_option(key, _override_value(key, overrides) or "''")
        return _unknown_key_message(key, _group_choices(overrides))
    if text.startswith("Error merging override ") and cause is not None:
        return _merge_message(text.removeprefix("Error merging override "), cause, overrides)
    match = re.search(r"Could not append to config. An item is already at '([^']+)'", text)
    if match:
        return f"invalid config: '{match.group(1)}' already exists; drop the leading '+'"
    detail = first_line(str(cause)) if cause else first_line(text)
    return f"invalid config: {detail}{_hint(text)}"


def _parsed(overrides: list[str]) -> list[Override]:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return OverridesParser.create().parse_overrides(overrides)
    except OverrideParseException:
        return []


def _group_choices(overrides: list[str]) -> list[str]:
    """The group choices the user made (netkv's and Hydra's own, e.g.
    hydra/launcher=submitit_local), so a hint lists the right keys."""
    return [o.input_line or "" for o in _parsed(overrides)
            if (o.key_or_group in GROUPS or "/" in o.key_or_group) and not o.is_sweep_override()]


def _override_value(key: str, overrides: list[str]) -> str | None:
    """The text the last override of ``key`` gave it (None: none gave it one)."""
    given = [(o.input_line or "").partition("=")[2] for o in _parsed(overrides)
             if o.key_or_group == key and not o.is_delete()]
    return given[-1] if given else None


def _merge_message(line: str, cause: BaseException, overrides: list[str]) -> str:
    """An override OmegaConf could not merge: a mapping given to a list (or
    the reverse), an index past a list's end, a value of the wrong type."""
    parsed = _parsed([line])
    if not parsed:
        return f"invalid config: {first_line(str(cause))}"
    key, text = parsed[0].key_or_group, line.partition("=")[2]
    detail = str(cause)
    if parsed[0].is_delete():
        return (f"invalid config: ~{key}: {first_line(detail)} (allowed: a value instead, "
                f"{key}=<value>)")
    if re.search(r"Cannot merge (DictConfig with ListConfig|ListConfig with DictConfig)", detail):
        node = _node_at(_composed(_group_choices(overrides)), key.split("."))
        clash = _clash(node, parsed[0].value(), key.split("."))
        if clash is not None:
            where, value, allowed = clash
            shown = text if where == key else _render(value)
            return f"invalid config: {where} = {shown} (allowed: {allowed})"
        return f"invalid config: {key} = {text} (allowed: a mapping where the config has one, " \
               "a list where it has a list)"
    match = re.search(r"full_key: (\S+)", detail)
    if "list index out of range" in detail and match:
        where = _dotted(match.group(1))
        head, _, index = where.rpartition(".")
        return (f"invalid config: {key} = {text}: {head} has no entry {index} (allowed: an index "
                f"below the list's length, or the whole list: {head}=[...])")
    match = re.search(r"could not be converted to (\w+)", detail)
    if match:
        wanted = _KEY_ALLOWED.get(key) or _TYPE_NAMES.get(match.group(1), f"a {match.group(1)}")
        return f"invalid config: {key} = {text} (allowed: {wanted})"
    return f"invalid config: {key} = {text}: {first_line(detail)}"


# what a key of Hydra's own takes, where its type says less
_KEY_ALLOWED = {"hydra.launcher.n_jobs": JOBS_ALLOWED}
_TYPE_NAMES = {"Integer": "an integer", "Float": "a number", "Boolean": "true or false",
               "String": "a string"}


def _dotted(full_key: str) -> str:
    """OmegaConf's ``a.b[5]`` as an override names it: ``a.b.5``."""
    return re.sub(r"\[(\d+)\]", r".\1", full_key)


def _node_at(node: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(node, DictConfig):
            node = node.get(part)
        elif isinstance(node, ListConfig) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _clash(node: Any, value: Any, path: list[str]) -> tuple[str, Any, str] | None:
    """The first key below ``path`` where ``value`` is a mapping and the
    config a list, or the reverse: (key, value there, what is allowed)."""
    if isinstance(value, dict) and isinstance(node, ListConfig):
        return ".".join(path), value, "a list"
    if isinstance(value, list) and isinstance(node, DictConfig):
        return ".".join(path), value, "a mapping"
    if isinstance(value, dict) and isinstance(node, DictConfig):
        for name, inner in value.items():
            found = _clash(node.get(str(name)), inner, [*path, str(name)])
            if found is not None:
                return found
    return None


def _render(value: Any) -> str:
    """A parsed override value as an override writes it: {a: 1}, [1, 2]."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_render(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_render(v) for v in value) + "]"
    return str(value)


def _unknown_key_message(key: str, choices: list[str]) -> str:
    """Name the first part of ``key`` the config does not have, with the
    keys beside it (``target.loop.depth`` on the testbed: ``target.loop``,
    the keys under ``target``), or the value ``key`` reaches below."""
    parts = key.split(".")
    node = _composed(choices)
    for depth, part in enumerate(parts[:-1]):
        child = node.get(part) if isinstance(node, DictConfig) else None
        if child is None:
            return _unknown_at(parts[:depth + 1], node)
        if isinstance(child, ListConfig):
            return _unknown_in_list(key, parts[:depth + 1])
        if not isinstance(child, DictConfig):
            where = ".".join(parts[:depth + 1])
            return (f"invalid config: unknown key '{key}' ({where} is a value, with no keys "
                    f"below it: allowed {where}=<value>)")
        node = child
    return _unknown_at(parts, node)


def _unknown_in_list(key: str, parts: list[str]) -> str:
    where = ".".join(parts)
    keys = _entry_keys(parts)
    entry = f"allowed keys of an entry: {', '.join(keys)}; or " if keys else "allowed: "
    return (f"invalid config: unknown key '{key}' ({where} is a list: {entry}set the list "
            f"whole, {where}=[...])")


def _entry_keys(parts: list[str]) -> list[str]:
    """The fields of an entry of the list at ``parts``, from the schema."""
    annotation: Any = RunConfig
    for part in parts:
        model = _model_of(annotation)
        if model is None or part not in model.model_fields:
            return []
        annotation = model.model_fields[part].annotation
    entry = _model_of(get_args(annotation)[0]) if get_origin(annotation) is list else None
    return list(entry.model_fields) if entry is not None else []


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model an annotation holds (unwrapping Optional, Annotated, unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) is list:
        return None
    for arg in get_args(annotation):
        model = _model_of(arg)
        if model is not None:
            return model
    return None


def _unknown_at(parts: list[str], parent: Any) -> str:
    head = ".".join(parts[:-1])
    known = sorted(str(k) for k in parent.keys() if k != "hydra") \
        if isinstance(parent, DictConfig) else []
    hint = f" (allowed keys{' under ' + head if head else ''}: {', '.join(known)})"
    return f"invalid config: unknown key '{'.'.join(parts)}'{hint}"


def _composed(choices: list[str]) -> DictConfig | None:
    try:
        with initialize_config_dir(config_dir=str(conf_dir()), version_base=None):
            return compose(CONFIG_NAME, overrides=choices, return_hydra_config=True)
    except Exception:  # noqa: BLE001 - best-effort hint only
        return None
