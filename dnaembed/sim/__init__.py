"""Simulated DNA-storage reads with their truth.

* :mod:`.strands`: strand designs (random, constrained, with primers);
* :mod:`.channel`: the synthesis + sequencing channel (presets, calibration);
* :mod:`.coverage`: reads per strand;
* :mod:`.simulate`: all three together, as ``dnaembed simulate`` runs them.
"""

