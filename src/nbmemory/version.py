"""The version of nbmemory (one place; the package and exports read it)."""

__version__ = "0.1.0"
