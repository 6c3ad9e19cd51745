"""The benchmark runners' tiny data: QuoteSum- and SQuAD-format records and a data folder."""

from __future__ import annotations

import json

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


# the KV benchmark's protocol and methods: a context and the question asked after it
KV_CONTEXT = "The cat sat on the mat near the door, and the dog slept by the fire all night long. " * 2
KV_QUESTION = "Where did the cat sit?"

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


# the length benchmark's tests: two articles of three paragraphs, each of three sentences of six words or more,
# one answerable question per paragraph (its answer in the second sentence) and an unanswerable one
LENGTH_TOPICS = (("river", "boats", "bridges"), ("castle", "towers", "knights"))


def _length_paragraph(article: int, index: int) -> dict:
    place, thing, other = LENGTH_TOPICS[article]
    answer = f"{thing}{article}{index}"
    first = f"The {place} number {index} of article {article} is very old indeed."
    second = f"Its keepers counted {answer} along the {place} every single spring."
    third = " ".join([f"Many {other} stand near the {place} today"] + ["and more"] * index) + "."
    context = f"{first} {second} {third}"
    return {
        "context": context,
        "qas": [
            {"id": f"a{article}-u{index}", "question": "Why?", "is_impossible": True, "answers": []},
            {
                "id": f"a{article}-q{index}",
                "question": f"What did the keepers of {place} {index} count?",
                "is_impossible": False,
                "answers": [{"text": answer, "answer_start": context.index(answer)}],
            },
        ],
    }


LENGTH_SQUAD = {
    "data": [
        {"title": LENGTH_TOPICS[a][0], "paragraphs": [_length_paragraph(a, i) for i in range(3)]}
        for a in range(2)
    ]
}


def context_files(directory):
    """Context files the CLI must refuse (latin-1, binary, blank) beside a good one, in ``directory``."""
    (directory / "latin1.txt").write_bytes("café au lait".encode("latin-1"))
    (directory / "binary.dat").write_bytes(b"\x7fELF\x00\x01\x02")
    (directory / "empty.txt").write_text("  \n\n", encoding="utf-8")
    (directory / "good.txt").write_text("Paris is the capital of France.", encoding="utf-8")
    return directory


def kv_row(method: str, setting: dict, record: str, ver: float, compression: float, match: float) -> dict:
    """One KV benchmark record line of ``method`` at ``setting`` (an ``rc`` one when it has a ``c``)."""
    name = "rc" if "c" in setting else method.split("/")[0]
    return {
        "method": method,
        "name": name,
        "setting": setting,
        "id": record,
        "ver": ver,
        "rouge1": 0.0,
        "rougeL": 0.0,
        "match": match,
        "compression_ratio": compression,
        "bytes_ratio": 1 - compression,
        "seconds": 1.0,
    }


def kv_summary(quality: str | None = "match", rc_ratio: bool = False) -> dict:
    """The KV benchmark's summary of three records through the full cache, SnapKV at 0.5 and RCKVCache at
    c = 1, w = 8 (``quality`` None: a run from before the needle task, which has no quality field; ``rc_ratio``:
    RCKVCache at the share 0.5 too, as ``--rc-ratios`` runs it)."""
    from rcattr.eval.kv.results import summarise

    settings = (
        ("full", {}, 0.0),
        ("snapkv/r=0.5", {"ratio": 0.5}, 0.5),
        ("rc/c=1/w=8", {"c": 1.0, "window": 8}, 0.4),
    ) + ((("rc/r=0.5/w=8", {"ratio": 0.5, "window": 8}, 0.5),) if rc_ratio else ())
    rows = [
        kv_row(method, setting, f"q{i}", 0.1 * (i + 1), compression, 1.0)
        for i in range(3)
        for method, setting, compression in settings
    ]
    header = {"config": {"dataset": "squad"}, "model": "m", "protocol": "p", "question_format": "q"}
    header |= {"max_new_tokens": 4} | ({"quality": quality} if quality else {})
    return summarise(rows, [method for method, _, _ in settings], header)


def squad_question(a: int, p: int, q: int) -> dict:
    """Question q of paragraph p of article a: answerable ("paragraph p", in its first sentence) for q < 2."""
    answers = [] if q == 2 else [{"text": f"paragraph {p}", "answer_start": len(f"Article {a} ")}]
    return {"id": f"{a}-{p}-{q}", "question": f"Q{q}?", "is_impossible": q == 2, "answers": answers}


# the groundedness benchmark's pairs: three articles of two paragraphs, two answerable questions and one not each
PAIRED_ARTICLES = [
    {
        "paragraphs": [
            {
                "context": f"Article {a} paragraph {p}. Its second sentence.",
                "qas": [squad_question(a, p, q) for q in range(3)],
            }
            for p in range(2)
        ]
    }
    for a in range(3)
]


def run_attribution(saved_model, out, *extra: str) -> dict:
    """Run the attribution benchmark on the QuoteSum data folder with ``saved_model``; its results.json."""
    from rcattr.eval.attribution import main

    arguments = ["--dataset", "quotesum", "--model", str(saved_model), "--out", str(out), "--ig-steps", "2"]
    assert main([*arguments, *extra]) == 0
    return json.loads((out / "results.json").read_text())


def attributionbench_lines(n: int = 24) -> str:
    """A tiny AttributionBench-format file: ``n`` short claims, half attributable, over two sources, and one
    whose reference fills a tiny model's window."""
    facts = [("cat", "sat", "mat"), ("dog", "ran", "park"), ("bird", "sang", "tree")]
    rows = []
    for i in range(n):
        animal, verb, place = facts[i % 3]
        attributable = i % 2 == 0
        claim = (
            f"The {animal} {verb} in the {place}." if attributable else f"The {animal} {verb} in {1900 + i}."
        )
        rows.append(
            {
                "question": f"What did the {animal} do?",
                "claim": claim + (" [1]" if i % 4 == 0 else ""),
                "references": [f"The {animal} {verb} in the {place}."],
                "attribution_label": "attributable" if attributable else "not attributable",
                "src_dataset": "ExpertQA" if i < n // 2 else "LFQA",
                "id": f"c{i}",
            }
        )
    rows.append({**rows[0], "id": "long", "references": ["The cat sat. " * 40]})
    return "".join(json.dumps(row) + "\n" for row in rows)
