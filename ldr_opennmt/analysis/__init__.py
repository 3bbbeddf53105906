"""Analyses of trained multi-domain models."""
