"""The Manager runtime: one manager per concern, each a small file."""
