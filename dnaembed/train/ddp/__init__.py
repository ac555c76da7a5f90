"""Data-parallel training: the process group, DDP communication hooks, local launch."""

