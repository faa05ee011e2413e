"""Command line: `ddpbayes audit ...`. A thin layer over the Python API (entry point:
`ddpbayes.cli.main:main`; also `python -m ddpbayes`)."""
