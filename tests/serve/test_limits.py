"""FastAPI's validation errors answered in one line: 400 for a body that is not JSON, 422 naming the field."""

from __future__ import annotations

from rcattr.serve.limits import one_line_reason


def test_invalid_json_is_400() -> None:
    status, detail = one_line_reason(
        [
            {
                "type": "json_invalid",
                "loc": ("body", 12),
                "msg": "JSON decode error",
                "ctx": {"error": "Expecting value"},
            }
        ]
    )
    assert status == 400 and "not valid JSON (Expecting value)" in detail


def test_a_missing_body_is_400() -> None:
    assert one_line_reason([{"type": "missing", "loc": ("body",), "msg": "Field required"}])[0] == 400


def test_the_most_specific_error_names_its_field_without_union_tags() -> None:
    errors = [
        {
            "type": "string_type",
            "loc": ("body", "documents", 2, "str"),
            "msg": "Input should be a valid string",
        },
        {
            "type": "string_type",
            "loc": ("body", "documents", 2, "DocumentIn", "text"),
            "msg": "Input should be a valid string",
        },
    ]
    assert one_line_reason(errors) == (422, "documents[2].text: Input should be a valid string")


def test_a_validator_s_message_that_names_its_field_is_kept() -> None:
    errors = [
        {"type": "value_error", "loc": ("body", "documents"), "msg": "Value error, documents[1] is a int"}
    ]
    assert one_line_reason(errors) == (422, "documents[1] is a int")
