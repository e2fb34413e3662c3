"""Compose ``conf/`` with overrides and validate it, failing in one line.

Every way a config can be wrong (unknown group option, misspelled key, wrong
type, out-of-range value) becomes a ``ConfigError`` whose message names the
key, the value and what is allowed (worded by netkv.config.errors). The CLI
prints it and exits with 2.
"""

from __future__ import annotations

import re
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.errors import (
    ConfigCompositionException,
    HydraException,
    MissingConfigException,
    OverrideParseException,
)
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationKeyError, OmegaConfBaseException
from pydantic import ValidationError

# also imported from here (the CLI, experiments.spec, the tests)
from netkv.config.core import CONFIG_NAME, GROUPS, ConfigError, conf_dir, group_options
from netkv.config.errors import (JOBS_ALLOWED, check_group_choices, composition_message,
                                 describe_validation_error, first_line, missing_option_message)
from netkv.config.schema import RunConfig
from netkv.config.setting import hint


def compose_raw(overrides: list[str], hydra: bool = False) -> DictConfig:
    """Hydra-compose the config (with its ``hydra`` node if ``hydra``),
    translating Hydra's errors into ConfigError."""
    check_group_choices(overrides)
    try:
        with initialize_config_dir(config_dir=str(conf_dir()), version_base=None):
            return compose(CONFIG_NAME, overrides=overrides, return_hydra_config=hydra)
    except MissingConfigException as exc:
        raise ConfigError(missing_option_message(str(exc))) from None
    except ConfigCompositionException as exc:
        raise ConfigError(composition_message(str(exc), exc.__cause__, overrides)) from None
    except OmegaConfBaseException as exc:
        raise ConfigError(f"config error: {first_line(str(exc))}") from None
    except OverrideParseException as exc:
        raise ConfigError(
            f"invalid override: {first_line(str(exc))} (expected key=value, e.g. alpha=1.2)"
        ) from None
    except HydraException as exc:
        raise ConfigError(f"invalid config: {first_line(str(exc))}") from None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        # Hydra's own checks that raise plain exceptions (e.g. `topology=5`:
        # a group choice that is not a name)
        raise ConfigError(f"invalid override: {first_line(str(exc))}") from None


def launcher_jobs(overrides: list[str]) -> object:
    """The composed, resolved ``hydra.launcher.n_jobs`` (None: the launcher
    has none, e.g. submitit's)."""
    cfg = compose_raw(overrides, hydra=True)
    try:
        return OmegaConf.select(cfg, "hydra.launcher.n_jobs")
    except OmegaConfBaseException as exc:
        raise ConfigError(f"invalid config: hydra.launcher.n_jobs: {first_line(str(exc))} "
                          f"(allowed: {JOBS_ALLOWED})") from None


def to_container(cfg: DictConfig) -> dict[str, Any]:
    try:
        data = OmegaConf.to_container(cfg, resolve=True)
    except InterpolationKeyError as exc:
        # e.g. ~protocol or ~alpha: another value is made of the removed one
        missing = re.search(r"Interpolation key '([^']+)'", str(exc))
        what = missing.group(1) if missing else "a key"
        group = what.split(".")[0]
        allowed = (f"{group}=<one of: {', '.join(group_options(group))}>" if group in GROUPS
                   else f"a value for {what}")
        raise ConfigError(f"invalid config: {what} is missing, and {exc.full_key} is made of "
                          f"it (allowed: {allowed}, not removed with '~')") from None
    except OmegaConfBaseException as exc:
        raise ConfigError(f"config error: {first_line(str(exc))}") from None
    assert isinstance(data, dict)
    data.pop("hydra", None)
    return data  # type: ignore[return-value]


def validate(data: dict[str, Any]) -> RunConfig:
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(hint(data, describe_validation_error(exc, data))) from None


def load(overrides: list[str]) -> RunConfig:
    """Compose and validate: the one entry point for a run's config."""
    return validate(to_container(compose_raw(overrides)))
