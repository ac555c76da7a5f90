"""Related design pools: simulate makes them, the split check and the threshold keep their
designs apart, and reads far longer than the rest change no other read's cluster."""

import numpy as np
import pytest
from conftest import assert_clean_error, run_cli
from rapidfuzz.distance import Levenshtein

from dnaembed.cluster.split import split_clusters
from dnaembed.cluster.threshold import Threshold
from dnaembed.encoding import reverse_complement
from dnaembed.io.sequences import read_sequences
from dnaembed.io.tables import read_table
from dnaembed.sim.channel import get_preset
from dnaembed.sim.coverage import Coverage
from dnaembed.sim.designs import RelatedDesigns, add_partners, share_region, window_designs
from dnaembed.sim.simulate import ReadLayout, simulate_reads
from dnaembed.sim.strands import random_strands

# ------------------------------------------------------------------ simulate


def test_windows_are_shifted_copies_of_one_sequence():
    designs = window_designs(30, 100, 25, np.random.default_rng(0), max_homopolymer=3)
    assert len(designs) == 30 and {len(d) for d in designs} == {100}
    for left, right in zip(designs, designs[1:]):
        assert left[25:] == right[:75]
        assert Levenshtein.distance(left, right) <= 50
    assert all("AAAA" not in d and "CCCC" not in d for d in designs)


def test_shared_region_and_partners():
    rng = np.random.default_rng(1)
    designs = random_strands(200, 110, rng)
    shared = share_region(designs, 10, 16, rng)
    assert len({d[10:26] for d in shared}) == 1
    assert [d[:10] + d[26:] for d in shared] == [d[:10] + d[26:] for d in designs]
    shifted = add_partners(designs, 0.3, rng, shift=14)
    changed = [i for i, (a, b) in enumerate(zip(designs, shifted)) if a != b]
    assert len(changed) == 30  # 30 pairs: 30 designs replaced by a partner of another
    for i in changed:
        source = next(d for d in shifted if d[14:] == shifted[i][:-14])
        assert Levenshtein.distance(source, shifted[i]) <= 28
    edited = add_partners(designs, 0.5, rng, edits=7, protect=(0, 20))
    partners = [d for d, old in zip(edited, designs) if d != old]
    assert len(partners) == 50
    for p in partners:
        nearest = min(Levenshtein.distance(p, d) for d in edited if d != p)
        assert nearest == 7
        source = min((d for d in edited if d != p), key=lambda d: Levenshtein.distance(p, d))
        assert source[:20] == p[:20]  # no edit inside the protected region


def test_related_options_are_validated():
    with pytest.raises(Exception, match="exactly one"):
        RelatedDesigns(partner_fraction=0.3)
    with pytest.raises(Exception, match="partner fraction"):
        RelatedDesigns(partner_shift=14)
    with pytest.raises(Exception, match="does not fit"):
        share_region(["ACGT" * 5], 15, 10, np.random.default_rng(0))


def test_simulate_cli_related_pool(tmp_path):
    args = ("simulate", "--strands", "60", "--length", "110", "--partners", "0.3",
            "--partner-edits", "10", "--shared-region", "12", "--shared-start", "40",
            "--mean-coverage", "3", "-q", "--seed", "3")
    out = run_cli(*args, "-o", "a", cwd=tmp_path, check=True).stdout.decode()
    assert "30% of designs in pairs 10 substitutions apart" in out and "12 nt shared" in out
    run_cli(*args, "-o", "b", cwd=tmp_path, check=True)
    assert (tmp_path / "a.refs.fasta").read_bytes() == (tmp_path / "b.refs.fasta").read_bytes()
    refs = read_sequences(tmp_path / "a.refs.fasta")
    assert len(set(refs.ids)) == 60 and len({s[40:52] for s in refs.seqs}) == 1
    close = [min(Levenshtein.distance(s, o) for o in refs.seqs if o is not s) for s in refs.seqs]
    assert sum(c == 10 for c in close) == 18  # 9 pairs, each design its own strand
    truth = read_table(tmp_path / "a.truth.tsv")
    assert {r[1] for r in truth} <= set(refs.ids)
    assert "partner_edits=10" in (tmp_path / "a.truth.tsv").read_text().splitlines()[0]
    windows = run_cli("simulate", "--strands", "10", "--length", "50", "--window-shift", "5",
                      "-o", "w", "-q", cwd=tmp_path, check=True)
    assert windows.returncode == 0
    w = read_sequences(tmp_path / "w.refs.fasta").seqs
    assert all(a[5:] == b[:45] for a, b in zip(w, w[1:]))
    assert_clean_error(run_cli("simulate", "--partners", "0.3", "-o", "x", cwd=tmp_path),
                       "--partner-shift", code=2)
    assert_clean_error(run_cli("simulate", "--window-shift", "5", "--length", "40-60",
                               "-o", "x", cwd=tmp_path),
                       "--window-shift 5 and --length 40-60: overlapping windows need one "
                       "strand length", code=2)
    assert not list(tmp_path.glob("x.*"))


# ------------------------------------------------------------------ split check


def two_design_reads(preset="nanopore", coverage=20, reverse=0.0, seed=0):
    rng = np.random.default_rng(seed)
    a = random_strands(1, 110, rng)[0]
    b = a[14:] + random_strands(1, 14, rng)[0]
    sim = simulate_reads([a, b], get_preset(preset), Coverage("fixed", mean=coverage),
                         ReadLayout(reverse_fraction=reverse), seed=seed)
    return sim


def test_split_check_separates_two_related_designs_in_one_cluster():
    sim = two_design_reads(reverse=0.5)
    n = len(sim)
    rc = [reverse_complement(s) for s in sim.seqs]
    threshold = Threshold(22, "data", same_peak=12, unrelated_peak=54, reference_length=110)
    # One cluster holding both designs, each read's orientation known (as linking gives it).
    groups, counts = split_clusters(sim.seqs, rc, np.zeros(n, np.int64),
                                    sim.reverse.astype(np.int8), np.arange(n, dtype=float),
                                    np.ones(n, np.int64), threshold)
    assert counts["splits"] == 1 and counts["split_tested"] == 1
    assert len(set(groups.tolist())) == 2
    for g in set(groups.tolist()):
        assert len(set(sim.strand[groups == g].tolist())) == 1  # each part one design


def test_split_check_keeps_a_noisy_single_design_whole():
    rng = np.random.default_rng(7)
    sim = simulate_reads(random_strands(1, 150, rng), get_preset("nanopore-hard"),
                         Coverage("fixed", mean=80), seed=7)
    n = len(sim)
    threshold = Threshold(42, "data", same_peak=30, unrelated_peak=80, reference_length=150)
    groups, counts = split_clusters(sim.seqs, None, np.zeros(n, np.int64), np.zeros(n, np.int8),
                                    np.zeros(n), np.ones(n, np.int64), threshold)
    assert counts["splits"] == 0 and len(set(groups.tolist())) == 1


# ------------------------------------------------------------------ reads far longer


@pytest.fixture(scope="module")
def model():
    from dnaembed.model.checkpoint import load_model

    return load_model(None).model


def partition(labels, rows):
    """The clusters of ``rows`` as a set of frozensets of row positions."""
    by = {}
    for pos, label in enumerate(np.asarray(labels)[rows].tolist()):
        by.setdefault(label, []).append(pos)
    return {frozenset(v) for v in by.values()}


def test_far_longer_reads_change_no_other_reads_cluster(model):
    from dnaembed.model.inference import embed_sequences
    from dnaembed.pipeline import cluster_reads

    rng = np.random.default_rng(11)
    sim = simulate_reads(random_strands(200, 120, rng), get_preset("nanopore"),
                         Coverage("fixed", mean=10), ReadLayout(reverse_fraction=0.5), seed=11)
    long_design = random_strands(1, 1000, rng)[0]
    copies = simulate_reads([long_design], get_preset("nanopore"), Coverage("fixed", mean=10),
                            seed=12).seqs
    one_long = random_strands(1, 10_000, rng)
    twenty = copies + random_strands(10, 1000, rng)
    # Every read embedded once (both orientations); each run below takes its rows.
    everything = sim.seqs + one_long + twenty
    forward = embed_sequences(model, everything)
    reverse = embed_sequences(model, [reverse_complement(s) for s in everything])

    def cluster(rows):
        return cluster_reads([everything[i] for i in rows],
                             embeddings=(forward[rows], reverse[rows]), params={"seed": 0})

    n = len(sim)
    original = partition(cluster(np.arange(n)).labels, np.arange(n))
    for name, extra in (("one 10,000-nt read", np.array([n])),
                        ("20 reads of 1,000 nt", n + 1 + np.arange(20))):
        # The extra reads spread through the input, not only at its end.
        where = np.sort(rng.choice(n + len(extra), len(extra), replace=False))
        rows = np.empty(n + len(extra), dtype=np.int64)
        rows[where] = extra
        others = np.setdiff1d(np.arange(len(rows)), where)
        rows[others] = np.arange(n)
        result = cluster(rows)
        assert partition(result.labels, others) == original, name
        assert result.stats["set_apart"] == len(extra)
        long_labels = result.labels[where]
        assert not set(long_labels.tolist()) & set(result.labels[others].tolist()), name
        if len(extra) == 20:
            # The ten copies of one long design form one cluster; the ten random reads are alone.
            assert len(set(long_labels[:10].tolist())) == 1
            assert len(set(long_labels.tolist())) == 11


# ------------------------------------------------------------------ the cluster command


def test_cluster_command_keeps_shifted_windows_apart_and_sets_long_reads_apart(tmp_path):
    """`dnaembed cluster` (the partitioned graph method, bundled search model): designs
    14 nt apart stay apart, and one 10,000-nt read changes no other read's cluster."""
    run_cli("simulate", "--strands", "40", "--length", "110", "--window-shift", "14",
            "--mean-coverage", "15", "--preset", "nanopore", "--seed", "5", "-q",
            "-o", str(tmp_path / "w"), check=True)
    reads = read_sequences(tmp_path / "w.fastq.gz")
    long_read = random_strands(1, 10_000, np.random.default_rng(9))[0]
    with open(tmp_path / "long.fastq", "w") as f:
        for i, (rid, seq) in enumerate(zip(reads.ids, reads.seqs)):
            if i == len(reads) // 2:
                f.write(f"@long\n{long_read}\n+\n{'I' * len(long_read)}\n")
            f.write(f"@{rid}\n{seq}\n+\n{'I' * len(seq)}\n")
    tables = {}
    for name, path in (("plain", tmp_path / "w.fastq.gz"), ("long", tmp_path / "long.fastq")):
        out = tmp_path / f"{name}.tsv"
        run_cli("cluster", str(path), "-o", str(out), "-q", check=True)
        rows = [line.split("\t") for line in out.read_text().splitlines()
                if not line.startswith("#")]
        tables[name] = {r[0]: r[1] for r in rows}
    plain, long = tables["plain"], tables["long"]
    ids = list(plain)
    assert partition([plain[i] for i in ids], range(len(ids))) == partition(
        [long[i] for i in ids], range(len(ids)))
    assert list(long.values()).count(long["long"]) == 1
    truth = {r[0]: r[1] for r in read_table(tmp_path / "w.truth.tsv")}
    # No cluster holds reads of two designs.
    for members in partition([plain[i] for i in ids], range(len(ids))):
        assert len({truth[ids[m]] for m in members}) == 1


def test_cluster_command_on_a_noisy_pool_whose_split_leaves_small_parts(tmp_path):
    """Noisy reads (the rescue then takes clusters of up to 5 reads) of designs 8 nt
    apart, ~5 reads each: the split after the rounds leaves parts small enough for the
    rescue whose reads have no embedding lists (those are made for the clusters small
    when the rounds end, before the split). This input once ended in an internal error;
    every read gets a cluster."""
    run_cli("simulate", "--strands", "200", "--window-shift", "8", "--mean-coverage", "5",
            "--preset", "nanopore-hard", "--seed", "1", "-q", "-o", str(tmp_path / "w"),
            check=True)
    out = tmp_path / "c.tsv"
    proc = run_cli("cluster", str(tmp_path / "w.fastq.gz"), "-o", str(out), "-t", "2")
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"internal error" not in proc.stderr
    rows = [line.split("\t") for line in out.read_text().splitlines()
            if not line.startswith("#")]
    assert len(rows) == len(read_sequences(tmp_path / "w.fastq.gz"))
    assert len({r[1] for r in rows}) > 1
