"""Datasets, metrics and benchmark runners (installed as `rcattr.eval`)."""
