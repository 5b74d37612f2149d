"""Catalog of the seeds' Hub datasets: config names, splits and columns, as data.

The check pass reads it so that ``dataset hf("cnn_dailymail")`` without the ``3.0.0``
config that ``datasets.load_dataset`` requires, or a split or column the dataset does not
have, is a positioned error at validate time rather than a failed run on eight devices.
It also gives the default text and target (summary) columns.  A Hub id not listed here
is passed through unchecked.  Where each fact comes from is said next to it.
"""

from __future__ import annotations

from accelctl.frozen import Value



class HubDataset(Value):
    hub_id: str
    #: config name -> the columns of its records
    configs: dict[str, tuple[str, ...]]
    #: ``load_dataset(id)`` without a config name fails ("Config name is missing")
    config_required: bool
    splits: tuple[str, ...]
    #: the text column used when the workload names none (the source for seq2seq)
    text_column: str
    #: seq2seq: the summary column used as the target when the workload names none
    target_column: str = ""
    #: other ids the Hub resolves to the same dataset
    aliases: tuple[str, ...] = ()
    #: where the facts above come from
    source: str = ""

    def columns(self, config: str) -> tuple[str, ...]:
        """Columns of ``config`` (of every config when it is ""), in catalog order."""
        if config:
            return self.configs.get(config, ())
        return tuple(dict.fromkeys(c for cols in self.configs.values() for c in cols))


_CNN_COLUMNS = ("article", "highlights", "id")
_WIKI_RAW = ("id", "title", "text")
_WIKI_TAGGED = ("id", "title", "sentence", "lemmas", "pos_tags", "wordnet_senses")

HUB_DATASETS: dict[str, HubDataset] = {
    d.hub_id: d
    for d in (
        # Seed 000: T5-3B summarization fine-tuning "on the CNN DailyMail dataset" with
        # Optimum Habana's summarization example.  Configs, splits (train 287,113 /
        # validation 13,368 / test 11,490) and columns from the dataset card of
        # abisee/cnn_dailymail (what the id cnn_dailymail resolves to); the Transformers
        # and Optimum Habana summarization READMEs pass `--dataset_config "3.0.0"`.
        HubDataset("cnn_dailymail", {"1.0.0": _CNN_COLUMNS, "2.0.0": _CNN_COLUMNS, "3.0.0": _CNN_COLUMNS},
                   config_required=True, splits=("train", "validation", "test"), text_column="article",
                   target_column="highlights", aliases=("abisee/cnn_dailymail",),
                   source="seed 000; dataset card of abisee/cnn_dailymail"),
        # Seed 001: BERT pre-training on wikicorpus_en (NVIDIA DeepLearningExamples' recipe
        # downloads and shards it to h5); on the Hub that corpus is wikicorpus, config raw_en.
        # Six configs, one train split; raw_* columns id/title/text, tagged_* the
        # word-level annotations: from the dataset card of gboleda/wikicorpus (the id
        # wikicorpus resolves to) and its loading script wikicorpus.py, also listed by
        # the TFDS community catalog (huggingface:wikicorpus/raw_en ...).  The dataset is
        # script-based: datasets >= 4 loads it only where the Hub serves a Parquet copy.
        HubDataset("wikicorpus", {"raw_ca": _WIKI_RAW, "raw_es": _WIKI_RAW, "raw_en": _WIKI_RAW,
                                  "tagged_ca": _WIKI_TAGGED, "tagged_es": _WIKI_TAGGED, "tagged_en": _WIKI_TAGGED},
                   config_required=True, splits=("train",), text_column="text", aliases=("gboleda/wikicorpus",),
                   source="seed 001; dataset card and wikicorpus.py of gboleda/wikicorpus"),
        # Seed 003: BLOOMZ prompts from tldr_news, keeping the content column and the first
        # 16 tokens of each record.  One config "all" (DEFAULT_CONFIG_NAME of the dataset's
        # tldr_news.py, so it may be left out), splits train / test, columns headline and
        # content (and category, a class label, since the script's v1.2.0).
        HubDataset("JulesBelveze/tldr_news", {"all": ("headline", "content", "category")},
                   config_required=False, splits=("train", "test"), text_column="content",
                   target_column="headline",
                   source="seed 003; tldr_news.py and dataset card of JulesBelveze/tldr_news"),
    )
}

_BY_ALIAS = {alias: d for d in HUB_DATASETS.values() for alias in (d.hub_id, *d.aliases)}


def hub_dataset(ref: str) -> HubDataset | None:
    """The catalog entry of a Hub id (or one of its aliases), None when not catalogued."""
    return _BY_ALIAS.get(ref)
