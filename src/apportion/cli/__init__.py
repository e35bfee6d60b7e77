"""The ``apportion`` command line (Typer + Rich)."""
