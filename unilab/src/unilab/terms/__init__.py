"""Term library: functions (and small classes where names must be resolved once)."""
