"""Configuration: Hydra composition of ``conf/`` validated by pydantic models.

  schema   the pydantic models (RunConfig and its groups)
  compose  compose + validate, with one-line errors (ConfigError, exit 2)
  errors   the wording of those errors (key = value, what is allowed)
"""
