"""Errors that ddpbayes reports to its user as one line (exit code 2 on the CLI)."""

__all__ = ["InputError"]


class InputError(ValueError):
    """The user's input (model, parameters, query, mechanism, options) cannot be used.

    The message is a complete sentence naming the problem; the CLI prints it on one line.
    """
