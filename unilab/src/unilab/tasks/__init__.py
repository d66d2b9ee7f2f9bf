"""Registered task owners."""
