"""Experiment drivers (the demo)."""
