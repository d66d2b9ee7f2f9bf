"""Benchmarks of the unilab runtime (the env step next to raw physics). They measure the
runtime from outside and are not part of it: nothing in ``unilab`` imports this package."""
