"""Data loaders (checksums, formats, clear errors) and the partitioners.

Format tests run on small files the tests write; tests on the real copies are
marked ``data`` and skip when ../shared/data (or $CFLAB_DATA) is absent.
"""

import gzip
import hashlib
import json
import struct
import tarfile

import numpy as np
import pytest

from nets.data import DataError, data_dir, load_cifar10, load_leaf, load_mnist, read_cifar_bin, read_idx
from nets.data.files import md5_of, verified_path
from nets.data.leaf import ALL_LETTERS, _listed_users, encode_text, leaf_user_count
from nets.data.text import _read_ag, _read_processed, load_ag_news, tokenize
from nets.datasets import DATASETS, build_federation
from nets.partition import cluster_sizes, partition

REAL = data_dir(None)


def _has(*rel):
    return all((REAL / r).exists() for r in rel)


# ------------------------------------------------------------------ IDX / MNIST
def _write_idx(path, arr):
    header = struct.pack(">BBBB", 0, 0, 0x08, arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + arr.astype(np.uint8).tobytes())


def test_read_idx_roundtrip_and_truncation(tmp_path):
    arr = np.random.default_rng(0).integers(0, 256, size=(5, 3, 4)).astype(np.uint8)
    _write_idx(tmp_path / "a.gz", arr)
    np.testing.assert_array_equal(read_idx(tmp_path / "a.gz"), arr)
    raw = gzip.open(tmp_path / "a.gz").read()
    (tmp_path / "b").write_bytes(raw[:-1])
    with pytest.raises(DataError, match="truncated"):
        read_idx(tmp_path / "b")
    (tmp_path / "c").write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(DataError, match="not an IDX file"):
        read_idx(tmp_path / "c")


def test_missing_and_corrupt_files_give_one_clear_message(tmp_path):
    with pytest.raises(DataError) as err:
        load_mnist(tmp_path)
    msg = str(err.value)
    assert "train-images-idx3-ubyte.gz" in msg and str(tmp_path / "mnist") in msg and "--download" in msg
    assert "\n" not in msg
    (tmp_path / "mnist").mkdir()
    (tmp_path / "mnist" / "train-images-idx3-ubyte.gz").write_bytes(b"garbage")
    with pytest.raises(DataError, match=r"is corrupt: md5 [0-9a-f]{32}, expected f68b3c2dcbeaaa9fbdd348bbdeb94873"):
        load_mnist(tmp_path)
    with pytest.raises(DataError, match="cannot be downloaded automatically"):
        from nets.data import fetch

        fetch("femnist", tmp_path)


# ---------------------------------------------------------------------- CIFAR
def _cifar_records(n, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n).astype(np.uint8)
    pixels = rng.integers(0, 256, (n, 3072)).astype(np.uint8)
    return labels, pixels, np.concatenate([labels[:, None], pixels], 1).tobytes()


def _write_cifar(folder, with_sums=True):
    bins = folder / "cifar10" / "cifar-10-batches-bin"
    bins.mkdir(parents=True)
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
    data = {}
    for s, name in enumerate(names):
        labels, pixels, raw = _cifar_records(4, s)
        (bins / name).write_bytes(raw)
        data[name] = (labels, pixels)
    if with_sums:
        lines = [f"{hashlib.md5((bins / n).read_bytes()).hexdigest()}  {n}" for n in names]
        (bins / "MD5SUMS").write_text("\n".join(lines) + "\n")
    return bins, data


def test_cifar_binary_batches(tmp_path):
    bins, data = _write_cifar(tmp_path)
    d = load_cifar10(tmp_path)
    assert d.X_train.shape == (20, 3, 32, 32) and d.X_test.shape == (4, 3, 32, 32) and d.notes == []
    labels, pixels = data["data_batch_2.bin"]
    np.testing.assert_array_equal(d.y_train[4:8], labels)
    # record layout: 1024 red, then green, then blue values, each row-major 32x32
    np.testing.assert_allclose(d.X_train[4, 1, 0, :5], pixels[0, 1024:1029] / 255.0, rtol=1e-6)
    np.testing.assert_allclose(d.X_train[5, 2, 31, 31], pixels[1, 3071] / 255.0, rtol=1e-6)
    raw = bytearray((bins / "test_batch.bin").read_bytes())
    raw[7] ^= 1
    (bins / "test_batch.bin").write_bytes(bytes(raw))
    load_cifar10.cache_clear()  # loaders cache one parse per process
    with pytest.raises(DataError, match="test_batch.bin is corrupt: md5"):
        load_cifar10(tmp_path)


def test_cifar_rotated_federation_on_generated_files(tmp_path):
    _write_cifar(tmp_path)
    load_cifar10.cache_clear()
    fed = build_federation("cifar-rotated", 4, 5, np.random.default_rng(0), n_test=2, data_dir=tmp_path)
    assert fed.X.shape == (4, 5, 3, 32, 32) and np.bincount(fed.clusters).tolist() == [2, 2]  # 0 and 180 degrees
    pool = load_cifar10(tmp_path).X_train
    back = np.rot90(fed.X[fed.clusters == 1], 2, axes=(-2, -1)).reshape(-1, 3, 32, 32)
    assert (_find(pool, back) >= 0).all()


def test_cifar_without_checksums_checks_structure(tmp_path):
    bins, _ = _write_cifar(tmp_path, with_sums=False)
    d = load_cifar10(tmp_path)
    assert any("no published checksum" in n for n in d.notes)
    with pytest.raises(DataError, match="not a multiple of 3073"):
        read_cifar_bin(b"\x00" * 3074, "x")
    with pytest.raises(DataError, match="label 12 outside 0..9"):
        read_cifar_bin(bytes([12]) + b"\x00" * 3072, "x")


def test_cifar_archive_is_md5_checked(tmp_path):
    bins, _ = _write_cifar(tmp_path / "src", with_sums=False)
    (tmp_path / "cifar10").mkdir()
    with tarfile.open(tmp_path / "cifar10" / "cifar-10-binary.tar.gz", "w:gz") as tar:
        tar.add(bins, arcname="cifar-10-batches-bin")
    with pytest.raises(DataError, match="cifar-10-binary.tar.gz is corrupt: md5 .* expected c32a1d4a"):
        load_cifar10(tmp_path)


def test_cifar_missing_names_the_file_and_the_archive(tmp_path):
    with pytest.raises(DataError, match=r"'data_batch_1.bin' not found in .*cifar-10-batches-bin and no "
                                        r"cifar-10-binary.tar.gz"):
        load_cifar10(tmp_path)


# ------------------------------------------------------------------------ LEAF
def _leaf_blob(users, rng, kind):
    data = {}
    for u in users:
        if kind == "femnist":
            data[u] = {"x": rng.random((3, 784)).round(3).tolist(), "y": rng.integers(0, 62, 3).tolist()}
        else:
            text = "".join(rng.choice(list(ALL_LETTERS[1:]), 81))
            data[u] = {"x": [text[:80], text[1:81]], "y": [text[80], "~"]}
    return {"users": users, "num_samples": [len(d["y"]) for d in data.values()], "user_data": data}


@pytest.mark.parametrize("kind", ["femnist", "shakespeare"])
def test_leaf_json_and_gzip(tmp_path, kind):
    rng = np.random.default_rng(0)
    folder = tmp_path / {"femnist": "leaf-femnist", "shakespeare": "leaf-shakespeare"}[kind]
    (folder / "train").mkdir(parents=True)
    (folder / "test").mkdir()
    (folder / "train" / "a.json").write_text(json.dumps(_leaf_blob(["u1", "u2"], rng, kind)))
    with gzip.open(folder / "train" / "b.json.gz", "wt") as f:
        f.write(json.dumps(_leaf_blob(["u3"], rng, kind)))
    (folder / "test" / "a.json").write_text(json.dumps(_leaf_blob(["u1", "u3", "u4"], rng, kind)))
    for split in ("train", "test"):  # files outside the known sample are used only when a checksum list names them
        sums = [f"{md5_of(p)}  {p.name}" for p in sorted((folder / split).iterdir())]
        (folder / split / "MD5SUMS").write_text("\n".join(sums) + "\n")
    d = load_leaf(kind, tmp_path)
    assert d.users == ["u1", "u3"]  # users with both splits
    assert leaf_user_count(kind, tmp_path) == 2  # from the files' users lists alone
    # a file whose users list is not its first key is read whole, with the same answer
    blob = _leaf_blob(["u5"], rng, kind)
    (folder / "test" / "c.json").write_text(json.dumps({"user_data": blob["user_data"], "users": blob["users"],
                                                        "num_samples": blob["num_samples"]}))
    assert _listed_users(folder / "test" / "c.json") == ["u5"]
    assert any("partial LEAF sample" in n for n in d.notes)
    x, y = d.train["u1"]
    if kind == "femnist":
        assert x.shape == (3, 1, 28, 28) and d.n_classes == 62
    else:
        assert x.shape == (2, 80) and y[1] == len(ALL_LETTERS)  # "~" is not in LEAF's alphabet: the extra index
        np.testing.assert_array_equal(encode_text(["\n !"]), [[0, 1, 2]])


def test_leaf_known_file_checksum(tmp_path):
    folder = tmp_path / "leaf-femnist" / "test"
    folder.mkdir(parents=True)
    with gzip.open(folder / "all_data_0_niid_05_keep_0_test_9.json.gz", "wt") as f:
        f.write("{}")
    with pytest.raises(DataError, match="corrupt: md5 .* expected 02ed032da43b6d34ee88606f2ab74110"):
        verified_path("femnist", "test/all_data_0_niid_05_keep_0_test_9.json", tmp_path,
                      alternatives=("test/all_data_0_niid_05_keep_0_test_9.json.gz",))


# ------------------------------------------------------------------------ text
def test_text_parsers(tmp_path):
    (tmp_path / "ag.csv").write_text('"3","Wall St. Bears","Short-sellers, Wall Street\'s dwindling"\n'
                                     '"1","A title","A description"\n')
    texts, y = _read_ag(tmp_path / "ag.csv")
    np.testing.assert_array_equal(y, [2, 0])
    assert texts[0][:3] == ["wall", "st", "bears"] and tokenize("It's A\\test") == ["it's", "a", "test"]
    (tmp_path / "r.review").write_text("great:2 not_bad:1 #label#:positive\nawful:3 #label#:negative\n")
    docs, labels = _read_processed(tmp_path / "r.review")
    assert docs == [{"great": 2, "not_bad": 1}, {"awful": 3}] and labels.tolist() == [1, 0]
    (tmp_path / "bad.review").write_text("great:2\n")
    with pytest.raises(DataError, match="processed_acl format"):
        _read_processed(tmp_path / "bad.review")


# ------------------------------------------------------------------ partitions
def _pool(n=400, side=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 1, side, side)).astype(np.float32)  # distinct images: each can be found again
    y = np.repeat(np.arange(10), n // 10)
    return X, y


def _find(pool, images):
    """Index of each image in the pool (-1 if absent); rounding absorbs float32 error of 1 - (1 - x)."""
    key = lambda img: np.round(img.astype(np.float64), 5).tobytes()  # noqa: E731
    index = {key(img): j for j, img in enumerate(pool)}
    return np.array([index.get(key(img), -1) for img in images])


def test_rotated_partition_ifca():
    X, y = _pool()
    Xt, yt = _pool(200, seed=1)
    rng = np.random.default_rng(0)
    p = partition("rotated", X, y, Xt, yt, 10, m=10, n=30, n_test=20, K=4, rng=rng)
    np.testing.assert_array_equal(np.bincount(p.clusters), cluster_sizes(10, 4))
    assert p.X.shape == (10, 30, 1, 4, 4) and p.X_test.shape == (10, 20, 1, 4, 4)
    for i in range(10):
        c = p.clusters[i]
        back = np.rot90(p.X[i], k=-c, axes=(-2, -1))  # undo the cluster's rotation of c * 90 degrees
        idx = _find(X, back)
        assert (idx >= 0).all() and len(set(idx)) == 30  # images of the pool, no repeats within a client
        np.testing.assert_array_equal(y[idx], p.y[i])
        tidx = _find(Xt, np.rot90(p.X_test[i], k=-c, axes=(-2, -1)))
        assert (tidx >= 0).all()  # test set from the same (rotated) distribution


@pytest.mark.parametrize("kind, K", [("rotated", 4), ("inverted", 2)])
def test_a_split_draw_uses_every_image_at_most_once(kind, K):
    # SR-FCA's public code (simulated.py:13-30): one permutation of each pool among all clients, so with m * n =
    # the pool every image is in exactly one client; the default draw repeats images across clusters
    X, y = _pool(300)
    Xt, yt = _pool(100, seed=1)
    args = dict(m=10, n=30, n_test=None, K=K)
    p = partition(kind, X, y, Xt, yt, 10, rng=np.random.default_rng(0), split=True, **args)
    assert p.X.shape[:2] == (10, 30) and p.X_test.shape[:2] == (10, 10)  # 100 test images / 10 clients

    def originals(images, pool):
        out = []
        for i in range(10):
            c = p.clusters[i]
            back = 1.0 - images[i] if (kind == "inverted" and c == 1) else np.rot90(images[i], k=-c, axes=(-2, -1))
            # the nearest pool image (float32 error of 1 - (1 - x) can cross a rounding boundary of _find)
            gap = np.abs(back.reshape(len(back), 1, -1) - pool.reshape(1, len(pool), -1)).max(-1)
            out.append(np.where(gap.min(1) < 1e-5, gap.argmin(1), -1))
        return np.concatenate(out)

    train, test = originals(p.X, X), originals(p.X_test, Xt)
    assert (train >= 0).all() and np.array_equal(np.sort(train), np.arange(300))  # each image exactly once
    assert (test >= 0).all() and np.array_equal(np.sort(test), np.arange(100))
    q = partition(kind, X, y, Xt, yt, 10, rng=np.random.default_rng(0), **args)
    assert len(set(originals(q.X, X))) < 300  # per-cluster permutations: images shared across clusters


def test_a_split_draw_is_refused_where_undefined():
    X, y = _pool(300)
    with pytest.raises(ValueError, match="split draw"):
        partition("label-skew-1", X, y, X, y, 10, m=4, n=10, n_test=5, K=2, rng=np.random.default_rng(0), split=True)
    with pytest.raises(ValueError, match="n_per_client=31 is too large for a split draw"):
        partition("inverted", X, y, X, y, 10, m=10, n=31, n_test=5, K=2, rng=np.random.default_rng(0), split=True)
    with pytest.raises(ValueError, match="draw='split'"):
        build_federation("digits-label-skew-1", 4, 10, np.random.default_rng(0), draw="split")


def test_input_scale_gives_the_raw_pixels_of_srfcas_code():
    # SR-FCA's code feeds inverted MNIST as uint8 cast to float, 255 - x inverted: 255 times the [0, 1] images
    base = build_federation("digits-inverted", 4, 10, np.random.default_rng(0), draw="split")
    raw = build_federation("digits-inverted", 4, 10, np.random.default_rng(0), draw="split", input_scale=255.0)
    np.testing.assert_allclose(raw.X, 255.0 * base.X, rtol=1e-6)
    np.testing.assert_allclose(raw.X_test, 255.0 * base.X_test, rtol=1e-6)
    assert np.array_equal(raw.y, base.y) and raw.X.max() > 1.0
    with pytest.raises(ValueError, match="input_scale"):
        build_federation("digits-inverted", 4, 10, np.random.default_rng(0), input_scale=0.0)


def test_inverted_and_two_cluster_rotation():
    X, y = _pool()
    p = partition("inverted", X, y, X, y, 10, m=4, n=10, n_test=5, K=None, rng=np.random.default_rng(1))
    assert (_find(X, p.X[p.clusters == 0].reshape(-1, 1, 4, 4)) >= 0).all()
    assert (_find(X, 1.0 - p.X[p.clusters == 1].reshape(-1, 1, 4, 4)) >= 0).all()
    q = partition("rotated", X, y, X, y, 10, m=4, n=10, n_test=5, K=2, rng=np.random.default_rng(1))
    assert (_find(X, np.rot90(q.X[q.clusters == 1], 2, axes=(-2, -1)).reshape(-1, 1, 4, 4)) >= 0).all()


def test_label_skews():
    X, y = _pool(2000)
    rng = np.random.default_rng(2)
    p1 = partition("label-skew-1", X, y, X, y, 10, m=8, n=20, n_test=10, K=4, rng=rng)
    sets = [set(p1.y[p1.clusters == c].ravel()) for c in range(4)]
    assert all(len(s) == 2 for s in sets) and len(set.union(*sets)) == 8
    for i in range(8):
        assert set(p1.y_test[i]) <= sets[p1.clusters[i]]
    p2 = partition("label-skew-2", X, y, X, y, 10, m=8, n=60, n_test=10, K=4, rng=rng)
    sets = [set(p2.y[p2.clusters == c].ravel()) for c in range(4)]
    assert all(len(s) == 4 for s in sets) and len(set.intersection(*sets)) == 2
    p3 = partition("label-skew-3", X, y, X, y, 10, m=10, n=50, n_test=10, K=5, rng=rng)
    missing = [set(range(10)) - set(p3.y[p3.clusters == c].ravel()) for c in range(4)]
    assert all(len(s) >= 1 for s in missing) and len(set.union(*missing)) >= 4
    X5, y5 = _pool(5000)
    p4 = partition("label-skew-4", X5, y5, X5, y5, 10, m=10, n=150, n_test=10, K=5, rng=rng)
    top = np.array([np.bincount(p4.y[i], minlength=10).max() / 150 for i in range(10)])
    # dominant class: 2/3 + (1/3)/10 = 0.7 in expectation; the mean over 10 clients has sd ~0.012, so a 0.06
    # window fails with probability < 1e-6 (fixed seed: deterministic here)
    assert abs(top.mean() - 0.7) < 0.06
    with pytest.raises(ValueError, match="clusters must be at most 5 for label-skew-1"):
        partition("label-skew-1", X, y, X, y, 10, m=12, n=5, n_test=5, K=6, rng=rng)
    with pytest.raises(ValueError, match="the training pool has .* samples of class"):
        partition("label-skew-1", X, y, X, y, 10, m=8, n=200, n_test=5, K=4, rng=rng)


def test_concept_shift_swaps_two_label_pairs_per_cluster():
    X, y = _pool(1000)
    p = partition("concept-shift", X, y, X, y, 10, m=8, n=40, n_test=10, K=4, rng=np.random.default_rng(3))
    maps = []
    for c in range(4):
        rows = np.flatnonzero(p.clusters == c)
        orig = y[_find(X, p.X[rows].reshape(-1, 1, 4, 4))]
        new = p.y[rows].ravel()
        mapping = dict(zip(orig.tolist(), new.tolist(), strict=True))
        moved = {a for a, b in mapping.items() if a != b}
        assert len(moved) == 4 and all(mapping[mapping[a]] == a for a in moved)  # two disjoint swaps
        maps.append(frozenset(moved))
    assert len(set(maps)) == 4  # unique per cluster


def test_dirichlet_and_feature_skew_reproducible():
    X, y = _pool(2000)
    a = partition("dirichlet", X, y, X, y, 10, m=6, n=20, n_test=5, K=3, rng=np.random.default_rng(4), alpha=0.3)
    b = partition("dirichlet", X, y, X, y, 10, m=6, n=20, n_test=5, K=3, rng=np.random.default_rng(4), alpha=0.3)
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_array_equal(a.X, b.X)
    f = partition("feature-skew", X, y, X, y, 10, m=8, n=20, n_test=5, K=4, rng=np.random.default_rng(5))
    for c in range(4):
        back = np.rot90(f.X[f.clusters == c], k=-c, axes=(-2, -1)).reshape(-1, 1, 4, 4)
        assert (_find(X, back) >= 0).all()
    allidx = _find(X, np.concatenate([np.rot90(f.X[f.clusters == c], k=-c, axes=(-2, -1)).reshape(-1, 1, 4, 4)
                                      for c in range(4)]))
    assert len(set(allidx)) == len(allidx)  # CLoVE's partition: without replacement across clusters


def test_digits_federations_build_without_downloads():
    rng = np.random.default_rng(0)
    for name in [d for d in DATASETS if d.startswith("digits-")]:
        kw = {"clusters": 5} if name.endswith("label-skew-3") else {}
        fed = build_federation(name, 10, 12, rng, n_test=5, **kw)
        assert fed.X.shape[:2] == (10, 12) and fed.clusters is not None
        assert fed.X_test.shape[:2] == (10, 5) and fed.n_samples.tolist() == [12] * 10


# ----------------------------------------------------------- the real copies
@pytest.mark.data
@pytest.mark.skipif(not _has("mnist/train-images-idx3-ubyte.gz", "fashion-mnist/train-images-idx3-ubyte.gz"),
                    reason="MNIST / Fashion-MNIST files absent")
def test_real_mnist_and_fashion():
    for fashion in (False, True):
        d = load_mnist(fashion=fashion)
        assert d.X_train.shape == (60000, 1, 28, 28) and d.X_test.shape == (10000, 1, 28, 28)
        assert d.X_train.max() == 1.0 and np.bincount(d.y_train).min() > 5000


@pytest.mark.data
@pytest.mark.skipif(not _has("leaf-femnist/test", "leaf-shakespeare/train"), reason="LEAF samples absent")
def test_real_leaf_samples_verified_and_partial_noted():
    from nets.data.checksums import LEAF_FEMNIST

    present = [rel for rel in LEAF_FEMNIST if (REAL / "leaf-femnist" / (rel + ".gz")).exists()]
    assert len(present) == 55  # 35 test + 20 train files in this copy (15 train files missing)
    for rel in present:  # the gzipped copies decompress to the JSON whose md5 the LEAF sample has
        assert verified_path("femnist", rel, alternatives=(rel + ".gz",))[1] == "md5"
    shk = build_federation("shakespeare", 5, 100, np.random.default_rng(0))
    assert shk.X.shape[2:] == (80,) and shk.y.max() < 81 and shk.vocab_size == 81 and shk.clusters is None


@pytest.mark.data
@pytest.mark.skipif(not _has("ag-news/test.csv", "amazon-blitzer/processed_acl"), reason="text data absent")
def test_real_text_data():
    ag = load_ag_news()
    assert ag.n_classes == 4 and any("train split absent" in n for n in ag.notes)
    assert len(ag.y_train) + len(ag.y_test) == 7600
    fed = build_federation("amazon", 8, 50, np.random.default_rng(0))
    np.testing.assert_array_equal(np.bincount(fed.clusters), [2, 2, 2, 2])
    assert fed.X.shape == (8, 50, 5000) and set(np.unique(fed.y)) == {0, 1}
