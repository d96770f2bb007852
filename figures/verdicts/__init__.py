"""The verdict machinery: published numbers (published), protocol ledgers (protocol), the statistical tests
and verdict words (rules), the row vocabulary (rows) and report rows (compare).  May import the engine.
"""
