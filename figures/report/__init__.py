"""The report: report.md and report.html assembled from the targets' status files, their headline, and the
console progress of a run.  May import figures.verdicts and the engine.
"""
