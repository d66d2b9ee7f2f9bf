"""Command-line entry points; the only modules that import unilab."""
