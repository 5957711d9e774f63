"""Bundled experiment configs (``*.toml``) and published reference numbers (``reference/``),
read through :mod:`dnnplace.data` so that an installed wheel has them too."""
