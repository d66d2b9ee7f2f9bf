"""Network building blocks for the algorithms (torch only)."""
