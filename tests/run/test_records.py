"""The worker's data loading through the real ``datasets`` library, on files the tests write.

Every format the DSL's ``files("...")`` reads (jsonl, csv, parquet, text, an image folder)
goes through ``datasets.load_dataset`` here, in this process; the Arrow cache goes to the
test's temporary folder.  Runs of the real worker on such files are in
``test_worker_data.py``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

datasets = pytest.importorskip("datasets")

from accelctl.contract.job import DeviceJob, WorkerJob  # noqa: E402
from accelctl.workload.types import (  # noqa: E402
    DatasetSpec,
    MeasureSpec,
    ModelSpec,
    OptimizerSpec,
    PrecisionSpec,
    TaskSpec,
)
from accelctl.worker import records  # noqa: E402

ROWS = [{"article": f"article {i}: " + "the cat sat on the mat. " * (i + 1), "highlights": f"cat {i}"}
        for i in range(7)]


@pytest.fixture(autouse=True)
def arrow_cache(tmp_path, monkeypatch):
    """load_dataset writes its Arrow cache under the test's folder, not ~/.cache."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf_cache"))


def write_jsonl(path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return path


def write_csv(path: Path) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=["article", "highlights"])
        w.writeheader()
        w.writerows(ROWS)
    return path


def write_parquet(path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(ROWS), path)
    return path


def write_text(path: Path) -> Path:
    # blank lines are no records
    path.write_text("\n".join(r["article"] for r in ROWS[:4]) + "\n\n" + "\n".join(r["article"] for r in ROWS[4:]),
                    encoding="utf-8")
    return path


@pytest.mark.parametrize("name, write, fmt", [("train.jsonl", write_jsonl, "json"), ("train.csv", write_csv, "csv"),
                                              ("train.parquet", write_parquet, "parquet")])
def test_table_files_load_with_their_columns(tmp_path, name, write, fmt):
    ds, got = records.load_local(str(write(tmp_path / name)), "train")
    assert got == fmt
    assert isinstance(ds, datasets.Dataset)
    assert len(ds) == len(ROWS)
    assert set(ds.column_names) == {"article", "highlights"}
    assert ds[3] == ROWS[3]


def test_text_file_is_one_record_per_non_blank_line(tmp_path):
    ds, fmt = records.load_local(str(write_text(tmp_path / "corpus.txt")))
    assert fmt == "text" and ds.column_names == ["text"]
    assert list(ds["text"]) == [r["article"] for r in ROWS]


def test_folder_of_one_format_and_the_split_name(tmp_path):
    folder = tmp_path / "shards"
    folder.mkdir()
    write_jsonl(folder / "a.jsonl")
    write_jsonl(folder / "b.jsonl")
    ds, fmt = records.load_local(str(folder), "validation")  # local files load as the split asked for
    assert fmt == "json" and len(ds) == 2 * len(ROWS) and ds.split == "validation"


def test_bad_local_data_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        records.load_local(str(tmp_path / "nope.csv"))
    (tmp_path / "x.xlsx").write_bytes(b"")
    with pytest.raises(ValueError, match="unknown data file type '.xlsx'"):
        records.load_local(str(tmp_path / "x.xlsx"))
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    write_csv(mixed / "a.csv")
    write_jsonl(mixed / "b.jsonl")
    with pytest.raises(ValueError, match=r"several formats \(csv, json\)"):
        records.load_local(str(mixed))


def test_image_folder(tmp_path):
    from PIL import Image

    for label, color in (("cat", (255, 0, 0)), ("dog", (0, 0, 255))):
        (tmp_path / "imgs" / label).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (20 + i, 16), color).save(tmp_path / "imgs" / label / f"{i}.png")
    ds, fmt = records.load_local(str(tmp_path / "imgs"))
    assert fmt == "imagefolder" and len(ds) == 6
    assert ds.features["label"].names == ["cat", "dog"]
    assert sorted(list(ds["label"])) == [0, 0, 0, 1, 1, 1]


def _job(data: DatasetSpec) -> WorkerJob:
    return WorkerJob(run_id="t", workload="w", target="cpu", backend="cpu", device=DeviceJob(),
                     task=TaskSpec(kind="finetune"), model=ModelSpec(source="arch", family="t5"), architecture={},
                     data=data,
                     precision=PrecisionSpec(), optimizer=OptimizerSpec(), measure=MeasureSpec())


def test_each_rank_takes_its_own_shard_and_the_counts_are_reported(tmp_path):
    path = str(write_csv(tmp_path / "pairs.csv"))
    data = DatasetSpec(kind="files", ref=path, column="article", target_column="highlights")
    shards = [records.load(_job(data), rank, 2, lambda *a: None) for rank in range(2)]
    assert [len(r.ds) for r in shards] == [4, 3]
    # shuffled with the job's seed, then split: disjoint shards that together hold every record
    together = list(shards[0].ds["article"]) + list(shards[1].ds["article"])
    assert sorted(together) == sorted(r["article"] for r in ROWS) and together != [r["article"] for r in ROWS]
    again = records.load(_job(data), 1, 2, lambda *a: None)
    assert list(again.ds["article"]) == list(shards[1].ds["article"])  # the same seed, the same shard
    assert shards[1].details == {"data_source": f"files:{path}", "data_format": "csv", "data_split": "train",
                                 "data_column": "article", "data_target_column": "highlights",
                                 "data_records": 7, "data_rank_records": 3}
    assert (shards[0].column, shards[0].target_column) == ("article", "highlights")
    assert shards[0].source == f"files:{path} (csv)"


def test_columns_default_and_missing(tmp_path):
    path = str(write_jsonl(tmp_path / "t.jsonl"))
    rec = records.load(_job(DatasetSpec(kind="files", ref=path)), 0, 1, lambda *a: None)
    assert rec.column == "article"  # no "text" column: the first text column
    with pytest.raises(KeyError, match=r"no column 'body' \(columns: article, highlights\)"):
        records.load(_job(DatasetSpec(kind="files", ref=path, column="body")), 0, 1, lambda *a: None)


# -- batches made from the records (the stand-in's tokenizer) ----------------------------------

def test_seq2seq_pairs_are_padded_and_masked(tmp_path):
    from accelctl.worker import data, models

    path = str(write_csv(tmp_path / "pairs.csv"))
    job = _job(DatasetSpec(kind="files", ref=path, column="article", target_column="highlights", seq_len=40,
                           target_len=8))
    job = WorkerJob.from_dict({**job.to_dict(), "batch": {"micro": 2, "accumulation": 1}})
    built = models.build(job, lambda *a: None)
    batches = data.training_batches(job, built, 0, 1, lambda *a: None)
    assert batches.details["data_records"] == 7 and batches.tokens_per_sample == 48
    seen = [next(batches) for _ in range(4)]  # 3 batches of 2 (the 7th record is a ragged rest), replayed
    assert seen[3]["input_ids"].equal(seen[0]["input_ids"])
    eos, pad = built.tokenizer.eos_token_id, built.tokenizer.pad_token_id
    for b in seen:
        assert b["input_ids"].shape == (2, 40) and b["labels"].shape == (2, 8)
        for ids, mask, labels in zip(b["input_ids"].tolist(), b["attention_mask"].tolist(), b["labels"].tolist()):
            n = sum(mask)
            assert ids[n - 1] == eos and all(i == pad for i in ids[n:]) and mask == [1] * n + [0] * (40 - n)
            kept = [x for x in labels if x != -100]
            assert kept[-1] == eos and labels == kept + [-100] * (8 - len(kept))
    text = built.tokenizer.decode(seen[0]["input_ids"][0].tolist())
    assert text.startswith("summarize: article ")  # the T5 summarization prefix
    assert built.model(**seen[0]).loss.item() > 0


def test_too_little_data_fails_at_setup(tmp_path):
    from accelctl.worker import data, models

    path = str(write_csv(tmp_path / "pairs.csv"))
    job = _job(DatasetSpec(kind="files", ref=path, column="article", target_column="highlights"))
    job = WorkerJob.from_dict({**job.to_dict(), "batch": {"micro": 8, "accumulation": 1}})
    built = models.build(job, lambda *a: None)
    with pytest.raises(ValueError, match=r"too few records for one batch of 8 on this rank \(7 records"):
        data.training_batches(job, built, 0, 1, lambda *a: None)


def test_image_folder_batches_for_a_vit(tmp_path):
    from PIL import Image

    from accelctl.worker import data, models

    for label, color in (("cat", (255, 0, 0)), ("dog", (0, 0, 255))):
        (tmp_path / "imgs" / label).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (40, 30 + i), color).save(tmp_path / "imgs" / label / f"{i}.png")
    job = WorkerJob(run_id="t", workload="w", target="cpu", backend="cpu", device=DeviceJob(),
                    task=TaskSpec(kind="pretrain"), model=ModelSpec(source="arch", family="vit", weights="random"),
                    architecture={},
                    data=DatasetSpec(kind="files", ref=str(tmp_path / "imgs")), precision=PrecisionSpec(),
                    optimizer=OptimizerSpec(), measure=MeasureSpec())
    job = WorkerJob.from_dict({**job.to_dict(), "batch": {"micro": 3, "accumulation": 1}})
    built = models.build(job, lambda *a: None)
    batches = data.training_batches(job, built, 0, 1, lambda *a: None)
    assert batches.details["data_format"] == "imagefolder" and batches.details["data_records"] == 6
    b = next(batches)
    size = built.shape["image_size"]
    assert b["pixel_values"].shape == (3, 3, size, size) and b["labels"].shape == (3,)
    for img, label in zip(b["pixel_values"], b["labels"].tolist()):
        red, blue = img[0].mean().item(), img[2].mean().item()
        assert (red, blue) == ((1.0, -1.0) if label == 0 else (-1.0, 1.0))  # cat is red, dog is blue, in [-1, 1]
