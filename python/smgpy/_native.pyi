"""Type stubs for the Rust extension module ``smgpy._native``.

Each area keeps its own section; keep the sections in this order.
"""

__version__: str

# ---- errors ----

# ---- parsers ----

# ---- template ----

# ---- stop ----

# ---- server ----
