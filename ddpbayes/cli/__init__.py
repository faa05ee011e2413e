"""Command line: `ddpbayes audit ...`. A thin layer over the Python API."""

from ddpbayes.cli.main import main

__all__ = ["main"]
