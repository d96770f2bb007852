"""The paper-scale campaign: cells, costs, planner and runner, run store, provenance, Dask runner, the measured-runs
target; its runs are the data folder figures/measured/.  May import figures.targets, verdicts, plots and the engine.
"""
