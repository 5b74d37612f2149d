"""``--train_file`` as optimum-habana's training examples accept it.

``run_clm.py``, ``run_mlm.py`` and ``run_summarization.py`` take one data file with an extension
their ``DataTrainingArguments`` lists (recorded by ``scripts/extract_habana_flags.py``).  A
workload's ``dataset files("...")`` is passed as it is when accepted; a ``.jsonl`` file or a
folder of files of one kind is converted at plan time into ``{run_dir}/train.<ext>`` (a generated
file of the plan, up to ``MAX_CONVERTED_BYTES``); anything else is refused at the dataset line
with the script's own words.
"""

from __future__ import annotations

from pathlib import Path

from accelctl.contract.plan import RUN_DIR, GeneratedFile
from accelctl.frozen import Value

#: the most a plan converts into its own file (a plan prints its generated files)
MAX_CONVERTED_BYTES = 1 << 20
#: file extension -> the kind the scripts read it as (JSON Lines is the json builder's)
KINDS = {"txt": "txt", "text": "txt", "csv": "csv", "json": "json", "jsonl": "json"}


class TrainFile(Value):
    """What ``--train_file`` gets: the path (``arg``), the generated file holding a conversion
    (``file``), a plan note; or why the script cannot take the data (``refused``)."""

    arg: str = ""
    file: GeneratedFile | None = None
    note: str = ""
    refused: str = ""


def accepted(flags: dict, script: str) -> list[str]:
    """The extensions ``script``'s ``train_file`` check accepts (recorded from its source)."""
    return list(flags["scripts"][script].get("file_extensions", {}).get("train_file", ("csv", "json", "txt")))


def train_file(script: str, ref: str, allowed: list[str]) -> TrainFile:
    """``--train_file`` for the data at ``ref`` (absolute, as the job resolved it)."""
    name = Path(script).name
    says = (f"{name} reads one {', '.join(allowed[:-1])} or {allowed[-1]} file (its DataTrainingArguments check: "
            f"\"`train_file` should be a {' or a '.join(allowed)} file\")")
    path = Path(ref)
    ext = path.suffix.lstrip(".").lower()
    if not path.exists():  # data on the machine that runs it: only its name can be checked here
        if ext in allowed:
            return TrainFile(arg=ref)
        return TrainFile(refused=f"{says}; {ref} is not here to be converted")
    if path.is_file():
        if ext in allowed:
            return TrainFile(arg=ref)
        if KINDS.get(ext) in allowed:
            return _converted([path], KINDS[ext], says)
        return TrainFile(refused=f"{says}; {path.name} is neither, nor JSON Lines (.jsonl) to convert")
    files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
    kinds = {KINDS.get(p.suffix.lstrip(".").lower()) for p in files}
    if not files or len(kinds) != 1 or None in kinds or next(iter(kinds)) not in allowed:
        found = ", ".join(sorted({p.suffix or "(none)" for p in files})) or "no files"
        return TrainFile(refused=f"{says}; the folder {path.name} holds {found}: give one file, or a folder of "
                                 f"files of one of those kinds")
    return _converted(files, kinds.pop(), says)


def _converted(files: list[Path], kind: str, says: str) -> TrainFile:
    size = sum(p.stat().st_size for p in files)
    if size > MAX_CONVERTED_BYTES:
        how = {"txt": "cat DIR/*.txt > corpus.txt", "json": "cat DIR/*.jsonl > corpus.json",
               "csv": "a csv with one header"}[kind]
        return TrainFile(refused=f"{says}; converting {len(files)} file(s) of {size} bytes at plan time is over "
                                 f"{MAX_CONVERTED_BYTES} bytes: write one file yourself ({how})")
    texts = [p.read_text(encoding="utf-8") for p in files]
    if kind == "json" and any(t.lstrip().startswith("[") for t in texts):
        return TrainFile(refused=f"{says}; a JSON array file cannot be joined with others: use JSON Lines (.jsonl)")
    if kind == "csv":
        headers = {t.split("\n", 1)[0].strip() for t in texts}
        if len(headers) != 1:
            return TrainFile(refused=f"{says}; the csv files have different headers")
        texts = [texts[0]] + [t.split("\n", 1)[1] if "\n" in t else "" for t in texts[1:]]
    content = "".join(t if t.endswith("\n") or not t else t + "\n" for t in texts)
    name = f"train.{kind}"
    what = f"{files[0].name}" if len(files) == 1 else f"{len(files)} .{kind} files of {files[0].parent.name}"
    return TrainFile(arg=f"{RUN_DIR}/{name}",
                     file=GeneratedFile(name, content, role=f"--train_file: {what}, converted at plan time"),
                     note=f"--train_file {RUN_DIR}/{name}: {what} converted at plan time ({size} bytes)")
