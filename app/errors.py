"""Errors the CLI reports as a one-line message and exit status 2 (no traceback)."""


class MlteError(Exception):
    """Base class of user-facing errors (bad input, bad config, unavailable resource)."""


class ConfigError(MlteError):
    """The configuration file or a value in it is invalid."""
