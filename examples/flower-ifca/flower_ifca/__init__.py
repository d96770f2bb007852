"""IFCA on rotated digits as a Flower app (cflab's ``nets.flower.clustered.IFCA``)."""
