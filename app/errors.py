"""Errors the CLI reports as a one-line message and exit status 2 (no traceback)."""


class MlteError(Exception):
    """Base class of user-facing errors (bad input, bad config, unavailable resource).

    Library packages (pce/, topology/, monitor/) do not import this; their own error bases set
    ``user_error = True`` and the CLI treats those the same way.
    """

    user_error = True


class ConfigError(MlteError):
    """The configuration file or a value in it is invalid."""
