"""``python -m paimond.cli``: the ``paimond`` command."""

import sys

from paimond.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
