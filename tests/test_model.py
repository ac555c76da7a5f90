import gzip
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch

from dnaembed.encoding import encode_padded
from dnaembed.errors import DnaembedError
from dnaembed.model.checkpoint import load_checkpoint, load_model, save_checkpoint
from dnaembed.model.encoder import (
    Encoder,
    EncoderConfig,
    PairPool,
    conv_pair_mean,
    reverse_reads,
    run_blocks,
    squared_distance,
)
from dnaembed.model.inference import (
    EmbedStats,
    cpu_isa_capped,
    embed_codes,
    embed_sequences,
)


@pytest.fixture
def small():
    torch.manual_seed(0)
    return Encoder(EncoderConfig(window=64, channels=[8, 8, 8], embedding_dim=16)).eval()


def test_reference_config_is_cnn_ed_5():
    cfg = EncoderConfig()
    assert cfg.channels == [64] * 5 and cfg.kernel_size == 3 and cfg.embedding_dim == 80
    assert cfg.window == 160 and cfg.scale == pytest.approx(2**-0.5)
    out = Encoder(cfg).eval()(torch.full((2, 160), 5, dtype=torch.uint8))
    assert out.shape == (2, 80)


def test_checkpoint_round_trip_gives_identical_embeddings(small, tmp_path):
    seqs = ["ACGT" * 10, "GGGTTTAAACCC" * 3, "NNNNACGT"]
    before = embed_sequences(small, seqs)
    path = tmp_path / "m.pt"
    save_checkpoint(path, small, metrics={"mae_near": 1.5})
    ckpt = load_checkpoint(path)
    after = embed_sequences(ckpt.model, seqs)
    assert np.array_equal(before, after)
    assert ckpt.metrics == {"mae_near": 1.5}
    assert ckpt.model.config == small.config


def test_tampered_checkpoint_is_refused(small, tmp_path):
    path = tmp_path / "m.pt"
    save_checkpoint(path, small)
    payload = torch.load(path, weights_only=True)
    name = next(iter(payload["state_dict"]))
    payload["state_dict"][name] = payload["state_dict"][name] + 1.0
    torch.save(payload, path)
    with pytest.raises(DnaembedError, match="do not match their checksum"):
        load_checkpoint(path)


class _Exploit:
    def __reduce__(self):
        return (print, ("code ran",))


def test_foreign_and_code_carrying_files_are_refused(tmp_path, capsys):
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(3)}, foreign)
    with pytest.raises(DnaembedError, match="not a dnaembed model file"):
        load_checkpoint(foreign)
    evil = tmp_path / "evil.pt"
    with open(evil, "wb") as fh:
        pickle.dump({"format": _Exploit()}, fh)
    with pytest.raises(DnaembedError, match="refused by the safe loader"):
        load_checkpoint(evil)
    assert "code ran" not in capsys.readouterr().out
    text = tmp_path / "text.pt"
    text.write_text("hello")
    with pytest.raises(DnaembedError, match="not a loadable dnaembed model: not a PyTorch "
                       "checkpoint"):
        load_checkpoint(text)  # was the safe loader's "101" (a pickle's opcode)
    reads = tmp_path / "reads.fastq.gz"  # was torch's paragraph on weights_only's default
    reads.write_bytes(gzip.compress(b"@r1\nACGT\n+\nIIII\n"))
    with pytest.raises(DnaembedError, match="not a PyTorch checkpoint"):
        load_checkpoint(reads)
    with pytest.raises(DnaembedError, match="no such model file"):
        load_model(tmp_path / "missing.pt")


def test_wrong_window_and_empty_batches(small):
    with pytest.raises(DnaembedError, match=r"expects \(batch, 64\)"):
        small(torch.zeros(2, 32, dtype=torch.uint8))
    with pytest.raises(DnaembedError, match="codes must be"):
        embed_codes(small, np.zeros((2, 10), dtype=np.uint8))
    assert embed_sequences(small, []).shape == (0, 16)


def test_long_reads_keep_their_start_and_are_counted(small):
    stats = EmbedStats()
    long_read = "ACGT" * 30  # 120 > window 64
    a = embed_sequences(small, [long_read, long_read[:64]], stats=stats)
    assert stats.reads == 2 and stats.truncated == 1
    assert np.allclose(a[0], a[1])


def test_n_bases_and_lower_case_embed(small):
    a = embed_sequences(small, ["ACGTNNNNACGT", "ACGTACGTACGT", ""])
    assert np.isfinite(a).all()
    assert not np.allclose(a[0], a[1])


def test_identical_reads_have_zero_distance(small):
    e = torch.from_numpy(embed_sequences(small, ["ACGTAC" * 8] * 2))
    assert float(squared_distance(e[0], e[1])) == 0.0


def test_bundled_model_loads():
    ckpt = load_model(None)
    assert ckpt.model.config.window >= 160
    assert embed_sequences(ckpt.model, ["ACGT" * 37]).shape == (1, ckpt.model.config.embedding_dim)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("length", [8, 9])
def test_pair_pool_matches_torch_pooling_values_and_gradients(mode, length):
    # Our own max backward must give the gradients of torch's max pooling (ties aside:
    # random inputs have none), also on odd lengths, where the last position is dropped.
    reference = torch.nn.functional.avg_pool1d if mode == "avg" else torch.nn.functional.max_pool1d
    x = torch.randn(3, 4, length, generator=torch.Generator().manual_seed(length))
    weights = torch.randn(3, 4, length // 2)
    ours, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    out = PairPool(mode)(ours)
    expected = reference(theirs, 2)
    assert torch.equal(out, expected)
    (out * weights).sum().backward()
    (expected * weights).sum().backward()
    assert torch.allclose(ours.grad, theirs.grad)
    assert ours.grad[..., length - length % 2 :].abs().sum() == 0
    with torch.no_grad():
        assert torch.equal(PairPool(mode)(x), expected)


def test_reverse_reads_reverses_each_read_and_keeps_padding():
    codes = torch.from_numpy(encode_padded(["ACGTT", "GGA", ""], 8))
    back = ["".join("ACGTN#"[c] for c in row) for row in reverse_reads(codes).tolist()]
    assert back == ["TTGCA###", "AGG#####", "########"]
    assert torch.equal(reverse_reads(reverse_reads(codes)), codes)


def test_two_ended_encoder_reads_from_both_ends():
    torch.manual_seed(1)
    cfg = EncoderConfig(window=64, channels=[8, 8, 8], embedding_dim=16, ends=2)
    model = Encoder(cfg).eval()
    # With the 3' branch's weights equal to the 5' branch's, reversing a read only
    # swaps the two halves of its embedding: the second half really reads it backwards.
    model.features_3p.load_state_dict(model.features.state_dict())
    model.head_3p.load_state_dict(model.head.state_dict())
    seqs = ["ACGTTGCAAGTC" * 3, "GATTACA" * 4]
    fwd = embed_sequences(model, seqs)
    rev = embed_sequences(model, [s[::-1] for s in seqs])
    assert fwd.shape == (2, 16)
    assert np.allclose(rev, np.concatenate([fwd[:, 8:], fwd[:, :8]], axis=1), atol=1e-5)
    # The halves differ by far more than the rounding the first check allows (random weights
    # give differences of ~1e-3, and how close they come depends on the CPU's kernels).
    assert np.abs(fwd[:, :8] - fwd[:, 8:]).max() > 10 * 1e-5


def test_two_ended_checkpoint_round_trip(tmp_path):
    torch.manual_seed(2)
    model = Encoder(EncoderConfig(window=64, channels=[8, 8, 8], embedding_dim=16, ends=2)).eval()
    save_checkpoint(tmp_path / "m.pt", model)
    again = load_checkpoint(tmp_path / "m.pt").model
    seqs = ["ACGT" * 9, "TTGACNA"]
    assert np.array_equal(embed_sequences(model, seqs), embed_sequences(again, seqs))


@pytest.mark.parametrize("ends, dim", [(3, 18), (2, 15), (0, 16), (2.0, 16), ("2", 16)])
def test_bad_ends_are_refused(ends, dim):
    with pytest.raises(DnaembedError, match="ends"):
        EncoderConfig(window=64, channels=[8, 8, 8], embedding_dim=dim, ends=ends)


@pytest.mark.parametrize("kernel", [3, 5])
@pytest.mark.parametrize("length", [8, 9])
def test_convolution_and_pair_mean_as_one_strided_convolution(kernel, length):
    # Same values and gradients as the two layers it replaces, odd lengths included.
    gen = torch.Generator().manual_seed(kernel * length)
    conv = torch.nn.Conv1d(4, 6, kernel, padding=kernel // 2)
    x = torch.randn(3, 4, length, generator=gen)
    weights = torch.randn(3, 6, length // 2, generator=gen)
    fused = conv_pair_mean(conv, x)
    expected = PairPool("avg")(conv(x))
    assert fused.shape == expected.shape
    assert torch.allclose(fused, expected, atol=1e-6)
    grads = []
    for out in (conv_pair_mean(conv, x), PairPool("avg")(conv(x))):
        conv.zero_grad()
        (out * weights).sum().backward()
        grads.append((conv.weight.grad.clone(), conv.bias.grad.clone()))
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(*grads))


@pytest.mark.parametrize("pool, dilations", [("avg", None), ("avg", [1, 2, 1]), ("max", None)])
def test_run_blocks_gives_the_layers_result(pool, dilations):
    torch.manual_seed(3)
    cfg = EncoderConfig(window=64, channels=[8, 8, 8], embedding_dim=16, pool=pool,
                        dilations=dilations, convs_per_block=2)
    model = Encoder(cfg).eval()
    x = model.one_hot[torch.from_numpy(encode_padded(["ACGTTGCA" * 5, "GATTACA"], 64)).long()]
    x = x.transpose(1, 2)
    assert torch.allclose(run_blocks(model.features, x), model.features(x), atol=1e-5)


def _views_pair(ends: int) -> tuple[Encoder, Encoder]:
    """An encoder, and the same weights with the complement view added."""
    torch.manual_seed(4)
    one = Encoder(EncoderConfig(window=64, channels=[8, 8, 8], embedding_dim=16, ends=ends))
    two = Encoder(EncoderConfig(window=64, channels=[8, 8, 8], embedding_dim=32, ends=ends,
                                views=2))
    # Running statistics from a batch of random reads, so that embeddings spread out.
    for layer in one.modules():
        if isinstance(layer, torch.nn.BatchNorm1d):
            layer.momentum = 1.0
    rng = np.random.default_rng(4)
    with torch.no_grad():
        one.train()(torch.from_numpy(rng.integers(0, 4, (64, 64), dtype=np.uint8)))
    two.load_state_dict(one.state_dict())
    return one.eval(), two.eval()


@pytest.mark.parametrize("ends", [1, 2])
def test_complement_view_averages_the_two_estimates(ends):
    one, two = _views_pair(ends)
    a = ["ACGTTGCAAGTCN" * 3, "GATTACA" * 4, "TTTT"]
    b = ["ACGTTGAAGTCA" * 3, "GATACCA" * 4, "GGCC"]
    comp = str.maketrans("ACGTN", "TGCAN")

    def dist(model, x, y):
        return squared_distance(torch.from_numpy(embed_sequences(model, x, precision="float32")),
                                torch.from_numpy(embed_sequences(model, y, precision="float32")))

    plain = dist(one, a, b)
    complemented = dist(one, [s.translate(comp) for s in a], [s.translate(comp) for s in b])
    assert not torch.allclose(plain, complemented, atol=1e-3)
    assert torch.allclose(dist(two, a, b), (plain + complemented) / 2, atol=1e-4)
    # Complementing a read swaps the views: the distance is blind to the relabelling.
    assert torch.allclose(dist(two, a, b), dist(two, [s.translate(comp) for s in a],
                                                 [s.translate(comp) for s in b]), atol=1e-4)


@pytest.mark.parametrize("views, dim", [(3, 48), (2, 18), (0, 16), (2.0, 16)])
def test_bad_views_are_refused(views, dim):
    with pytest.raises(DnaembedError, match="views"):
        EncoderConfig(window=64, channels=[8, 8, 8], embedding_dim=dim, ends=2, views=views)


def test_a_capped_instruction_set_has_no_native_bfloat16():
    # Emulating an AVX2 laptop on a CPU with AVX512-BF16 must not pick bfloat16: the
    # capped kernels emulate it, ten times slower than float32.
    assert cpu_isa_capped("AVX2", "AVX512")
    assert cpu_isa_capped(None, "AVX2")
    assert cpu_isa_capped("avx512_core", "AVX512")
    assert not cpu_isa_capped(None, "AVX512")
    assert not cpu_isa_capped("AVX512_CORE_BF16", "AVX512")
    assert not cpu_isa_capped("avx512_core_amx", "AVX512")
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2", ATEN_CPU_CAPABILITY="avx2")
    code = ("import torch; from dnaembed.model.inference import resolve_precision; "
            "print(resolve_precision('auto', torch.device('cpu')))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "float32"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is there")
def test_a_cuda_device_without_cuda_is_named_as_given():
    from dnaembed.model.checkpoint import resolve_device

    with pytest.raises(DnaembedError, match=r"^--device cuda:9 requested but no CUDA device "
                       "is available$"):
        resolve_device("cuda:9")
