"""``python -m dnnplace`` runs the command line (same as the ``dnnplace`` script)."""

import sys

from dnnplace.cli import main

if __name__ == "__main__":
    sys.exit(main())
