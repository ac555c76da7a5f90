"""Batched inference: reads -> embeddings on the edit-distance scale.

The squared Euclidean distance between two rows approximates the Levenshtein
distance of the two reads, so the vectors can be used directly with any vector
tool. Reads longer than the model's window keep their first ``window`` bases
(the 5' end, which sequencers read best); the caller is told how many were cut.
``N`` is encoded as a quarter of each base; empty reads embed as all padding.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from dnaembed.encoding import encode_padded
from dnaembed.errors import DnaembedError
from dnaembed.io.vectors import DTYPES, NpyAppender, check_embedding_output, ids_path_for
from dnaembed.model.encoder import Encoder

PRECISIONS = ("auto", "float32", "bfloat16")


def native_bfloat16(device: torch.device) -> bool:
    """True where bfloat16 matrix arithmetic runs in hardware (CUDA, AVX512-BF16 or AMX CPUs)
    and the instruction set is not capped below it (:func:`cpu_isa_capped`)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if cpu_isa_capped(os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA"),
                      torch.backends.cpu.get_cpu_capability()):
        return False
    try:
        with open("/proc/cpuinfo") as fh:
            flags = next((line for line in fh if line.startswith("flags")), "")
    except OSError:
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


def cpu_isa_capped(onednn_max_isa: str | None, aten_capability: str) -> bool:
    """Whether oneDNN's or ATen's instruction set is capped below AVX-512 with bfloat16.

    An AVX2 laptop is emulated on a larger CPU with ``ONEDNN_MAX_CPU_ISA=AVX2
    ATEN_CPU_CAPABILITY=avx2``. The CPU's flags still list bfloat16 then, but the
    kernels would emulate it, several times slower than float32 (measured: 351 s
    of embedding at 10^6 reads, against about 50 s).
    """
    if aten_capability != "AVX512":
        return True
    isa = (onednn_max_isa or "ALL").upper()
    return not (isa in ("ALL", "DEFAULT") or "BF16" in isa or "AMX" in isa or "FP16" in isa
                or isa.startswith("AVX10"))


def resolve_precision(precision: str, device: torch.device) -> str:
    """``auto``: bfloat16 where the hardware has it natively (faster there, and as accurate
    as float32 for embedding: ``docs/benchmarks.md``), float32 elsewhere."""
    if precision not in PRECISIONS:
        raise DnaembedError(f"unknown precision {precision!r} (known: {', '.join(PRECISIONS)})")
    if precision == "auto":
        return "bfloat16" if native_bfloat16(device) else "float32"
    return precision


@dataclass
class EmbedStats:
    """What inference did: reads embedded and reads cut to the window."""

    reads: int = 0
    truncated: int = 0


def default_batch_size(device: torch.device) -> int:
    """Reads per forward pass: small on CPU, where a batch's activations must stay in
    cache (a batch of 4096 was much slower there), large on GPU."""
    return 4096 if device.type == "cuda" else 256


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager[Any]:
    """Context in which the encoder runs at ``precision`` (training uses it too)."""
    precision = resolve_precision(precision, device)
    if precision == "float32":
        return contextlib.nullcontext()
    if precision == "bfloat16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    raise DnaembedError(f"unknown precision {precision!r} (known: {', '.join(PRECISIONS)})")


@torch.inference_mode()
def embed_codes(
    model: Encoder,
    codes: np.ndarray,
    *,
    batch_size: int | None = None,
    precision: str = "auto",
) -> np.ndarray:
    """Embed a ``(n, window)`` code matrix; returns float32 ``(n, D)``."""
    if codes.ndim != 2 or codes.shape[1] != model.config.window:
        raise DnaembedError(
            f"codes must be (n, {model.config.window}) for this model, got {codes.shape}"
        )
    device = next(model.parameters()).device
    batch_size = batch_size or default_batch_size(device)
    model.eval()
    out = np.empty((len(codes), model.config.embedding_dim), dtype=np.float32)
    with autocast(device, precision):
        for start in range(0, len(codes), batch_size):
            batch = torch.from_numpy(codes[start : start + batch_size]).to(device)
            out[start : start + len(batch)] = model(batch).float().cpu().numpy()
    return out


def embed_sequences(
    model: Encoder,
    seqs: Sequence[str],
    *,
    batch_size: int | None = None,
    precision: str = "auto",
    stats: EmbedStats | None = None,
) -> np.ndarray:
    """Embed validated (ACGTN, upper-case) sequences; returns float32 ``(n, D)``."""
    window = model.config.window
    if stats is not None:
        stats.reads += len(seqs)
        stats.truncated += sum(1 for s in seqs if len(s) > window)
    if len(seqs) == 0:
        return np.zeros((0, model.config.embedding_dim), dtype=np.float32)
    out = np.empty((len(seqs), model.config.embedding_dim), dtype=np.float32)
    # Encode in slices so that memory stays bounded by the slice, not the input.
    step = 16384
    for start in range(0, len(seqs), step):
        chunk = seqs[start : start + step]
        codes = encode_padded(chunk, window)
        out[start : start + len(chunk)] = embed_codes(
            model, codes, batch_size=batch_size, precision=precision
        )
    return out


def iter_embeddings(
    model: Encoder,
    chunks: Iterator[Sequence[str]],
    *,
    batch_size: int | None = None,
    precision: str = "auto",
    stats: EmbedStats | None = None,
) -> Iterator[np.ndarray]:
    """Streaming form: one embedding block per chunk of sequences."""
    for chunk in chunks:
        yield embed_sequences(model, chunk, batch_size=batch_size, precision=precision, stats=stats)


@dataclass
class EmbedSummary:
    """What ``embed_file`` wrote."""

    reads: int
    truncated: int
    dim: int
    dtype: str
    window: int


def embed_file(
    reads_path: str | os.PathLike,
    model: Encoder,
    output: str | os.PathLike,
    *,
    dtype: str = "float32",
    batch_size: int | None = None,
    chunk_size: int = 65536,
    precision: str = "auto",
) -> EmbedSummary:
    """Embed every read of a FASTA/FASTQ file into ``output`` (.npy) and its ids file.

    Streams ``chunk_size`` reads at a time (bounded memory). Reads longer than
    the model's window are embedded by their first ``window`` bases (counted
    in ``truncated``).
    """
    from dnaembed.io.atomic import atomic_path
    from dnaembed.io.sequences import iter_read_chunks
    from dnaembed.log import progress_bar
    from dnaembed.model.inference import EmbedStats, embed_sequences

    if dtype not in DTYPES:
        raise DnaembedError(f"unknown dtype {dtype!r} (use {' or '.join(DTYPES)})")
    check_embedding_output(output, "output")
    dim = model.config.embedding_dim
    stats = EmbedStats()
    ids_path = ids_path_for(output)
    with (
        atomic_path(output) as npy_tmp,
        atomic_path(ids_path) as ids_tmp,
        open(npy_tmp, "wb") as npy,
        open(ids_tmp, "w", encoding="utf-8") as ids_out,
        progress_bar(unit=" reads", desc="embedding") as bar,
    ):
        writer = NpyAppender(npy, dim, dtype)
        for chunk in iter_read_chunks(reads_path, chunk_size):
            block = embed_sequences(model, chunk.seqs, batch_size=batch_size,
                                    precision=precision, stats=stats)
            writer.append(block)
            ids_out.writelines(rid + "\n" for rid in chunk.ids)
            bar.update(len(chunk))
        writer.close()
    return EmbedSummary(stats.reads, stats.truncated, dim, dtype, model.config.window)
