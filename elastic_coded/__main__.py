"""``python -m elastic_coded``: the command line (:mod:`elastic_coded.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
