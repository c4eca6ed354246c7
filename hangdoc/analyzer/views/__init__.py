"""Analyses that several rules share, computed from the model alone (DESIGN.md: views).

A view reads the Evidence and nothing else (no parser, loader, renderer or rule), so a
rule can trust it and a test can build its input by hand.
"""
