"""The paper-scale campaign: planner, run store, Dask runner and the measured-runs target; its runs are the
data folder figures/measured/.  May import figures.targets, verdicts, plots and the engine.
"""
