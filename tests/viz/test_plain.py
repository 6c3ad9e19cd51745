"""A result as plain JSON values (rcattr.viz.plain): what ``to_dict`` gives, for an RC result and a baseline's."""

from __future__ import annotations

import json

from rcattr.viz.plain import result_dict
from tests.helpers.cited import sentence_result, supported_result


def test_the_dict_is_the_result_s_to_dict_and_plain_json() -> None:
    result = sentence_result(reliance=[0.7, 0.6, 0.1])
    plain = result_dict(result)
    assert plain == result.to_dict() and json.loads(json.dumps(plain)) == plain
    assert plain["heads"]["selected"] == [[0, 0]] and plain["heads"]["lexical_share"] is None
    assert plain["seq_attr"] == result.seq_attr.tolist() and plain["answer"] == result.answer


def test_a_baseline_has_no_rc_values_and_flags_nothing() -> None:
    result = supported_result([0.1] * 11)
    result.rc = None
    plain = result_dict(result)
    assert plain["heads"] is None and plain["token_support"] is None and plain["unsupported_tokens"] == []
