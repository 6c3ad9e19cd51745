"""The benchmark runners' tiny data: QuoteSum- and SQuAD-format records and a data folder."""

from __future__ import annotations

# the benchmark runners' tests: a tiny saved model and a tiny QuoteSum-format file
QUOTESUM_RECORDS = [
    {
        "qid": f"q{i}",
        "unique_id": f"q{i}_0",
        "question": "Who sat?",
        "summary": f"[ 1 The cat sat ] and [ 2 dogs {verb} ].",
        "title1": "Cats",
        "source1": "The cat sat on a mat.",
        "title2": "Dogs",
        "source2": f"Loud dogs {verb} at night.",
        **{f"{field}{slot}": "" for slot in range(3, 9) for field in ("title", "source")},
    }
    for i, verb in enumerate(["bark", "run", "howl"])
]


def data_folder(tmp_path, monkeypatch, relative: str, text: str):
    """A benchmark data folder holding one file (``RCATTR_DATA`` points there); returns ``tmp_path``."""
    path = tmp_path / "data" / relative
    path.parent.mkdir(parents=True)
    path.write_text(text)
    monkeypatch.setenv("RCATTR_DATA", str(tmp_path / "data"))
    return tmp_path


TIMINGS = ("seconds", "seconds_per_example", "peak_memory_mib")


def without_timings(value):
    """A benchmark's results or rows without the fields that differ from run to run (times, memory)."""
    if isinstance(value, dict):
        return {key: without_timings(item) for key, item in value.items() if key not in TIMINGS}
    if isinstance(value, list):
        return [without_timings(item) for item in value]
    return value


# the KV benchmark runners' tests: a tiny SQuAD v2 file of two paragraphs, one answerable question each
PARAGRAPHS = [
    "The cat sat on the mat near the door while the dog slept by the fire. Later the cat moved to the "
    "garden, where it watched birds in the old apple tree until dark.",
    "Paris is the capital of France and sits on the Seine. The Eiffel Tower, finished in 1889, rises "
    "330 metres over the Champ de Mars on the left bank of the river.",
]
SQUAD = {
    "data": [
        {
            "title": "tiny",
            "paragraphs": [
                {
                    "context": context,
                    "qas": [
                        {
                            "id": f"p{i}-a",
                            "question": "Where?",
                            "is_impossible": False,
                            "answers": [{"text": context.split()[3], "answer_start": 0}],
                        },
                        {"id": f"p{i}-b", "question": "Why?", "is_impossible": True, "answers": []},
                    ],
                }
                for i, context in enumerate(PARAGRAPHS)
            ],
        }
    ]
}


def context_files(directory):
    """Context files the CLI must refuse (latin-1, binary, blank) beside a good one, in ``directory``."""
    (directory / "latin1.txt").write_bytes("café au lait".encode("latin-1"))
    (directory / "binary.dat").write_bytes(b"\x7fELF\x00\x01\x02")
    (directory / "empty.txt").write_text("  \n\n", encoding="utf-8")
    (directory / "good.txt").write_text("Paris is the capital of France.", encoding="utf-8")
    return directory
