"""``python -m dnnplace`` runs the command line (same as the ``dnnplace`` script)."""

from dnnplace.cli import run

if __name__ == "__main__":
    run()
