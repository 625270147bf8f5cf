"""User-facing errors of the monitor package (the CLI prints them as one line, exit status 2)."""


class MonitorError(Exception):
    """Bad input to a monitor command (unreadable file, bad value)."""

    user_error = True
