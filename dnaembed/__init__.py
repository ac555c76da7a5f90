"""dnaembed: cluster DNA-storage reads with a learned embedding of the Levenshtein distance."""

__version__ = "0.1.0"
