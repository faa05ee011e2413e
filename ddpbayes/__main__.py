"""`python -m ddpbayes`: the command line."""

import sys

from ddpbayes.cli.main import main

sys.exit(main())
