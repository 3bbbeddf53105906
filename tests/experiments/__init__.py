"""Tests of the experiments package (:mod:`ldr_experiments`)."""
