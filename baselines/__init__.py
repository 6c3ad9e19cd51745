"""Baseline attributors (installed as ``rcattr.baselines``)."""
