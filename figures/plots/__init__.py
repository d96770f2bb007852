"""Plotting: the figures' style (style), dot plots (dotplot) and the checks every saved figure passes
(figcheck).  Imports no other part of figures.
"""
