"""The paper targets: one module per paper's figures and tables (and netcommon, what the network targets share).
May import the engine (figures.registry, runs, trials), figures.verdicts and figures.plots.
"""
