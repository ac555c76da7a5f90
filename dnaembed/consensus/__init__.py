"""Strand reconstruction: one consensus sequence per cluster (see :mod:`.engine`)."""

