"""The one exception type that means "the user's input is wrong".

Anything raised as `UsageError` is printed by the CLI as a one-line message (no traceback
unless --debug) and exits with status 2. Every other exception is a bug in this package.
"""


class UsageError(Exception):
    """Bad input: a config key, a file, a column, a number out of range. Exit code 2."""
