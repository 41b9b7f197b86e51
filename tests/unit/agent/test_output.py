"""Output types (issue #28 item 2): what is accepted as one, its schema, and typing a value the CLI accepted."""

from __future__ import annotations

import pickle
import sys
import types

import pytest
from pydantic import BaseModel, RootModel, field_validator

from flower.agent.output import (
    checkpointable,
    json_value,
    output_format,
    output_mismatch,
    output_schema,
    parse_output,
    retyped,
)
from flower.errors import ConfigError


class Count(BaseModel):
    files: int
    names: list[str] = []

    @field_validator("files")
    @classmethod
    def not_negative(cls, value: int) -> int:
        if value < 0:
            raise ValueError("a count is never negative")
        return value


SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def test_a_model_and_a_schema_give_the_cli_an_object_schema() -> None:
    assert output_schema(Count)["properties"]["files"] == {"title": "Files", "type": "integer"}
    assert output_format(SCHEMA) == {"type": "json_schema", "schema": SCHEMA}


@pytest.mark.parametrize(("value", "needle"), [
    (int, "must be a pydantic model class or a JSON schema (a dict), not int"),
    ("Count", "not str 'Count'"),
    (Count(files=1), "not Count"),
    ({"type": "objekt"}, "is not a valid JSON schema (type): 'objekt' is not valid"),
    ({"type": "object", "required": "n"}, "is not a valid JSON schema (required): 'n' is not of type 'array'"),
    ({"type": "array", "items": {"type": "string"}}, "the schema's top level must be an object"),
    (RootModel[list[int]], "the schema's top level must be an object"),
])
def test_anything_else_is_one_line_naming_the_owner(value: object, needle: str) -> None:
    with pytest.raises(ConfigError) as caught:
        output_schema(value, "step count: output_type")
    message = str(caught.value)
    assert message.startswith("step count: output_type") and needle in message and "\n" not in message


def test_a_model_types_the_value_and_its_own_validators_hold() -> None:
    value = parse_output(Count, {"files": 2, "names": ["a"]})
    assert isinstance(value, Count) and value.files == 2
    with pytest.raises(ValueError, match=r"^Count: files: Value error, a count is never negative$"):
        parse_output(Count, {"files": -1})


def test_a_schema_keeps_the_json_value_and_checks_it() -> None:
    assert parse_output(SCHEMA, {"n": 3}) == {"n": 3}
    with pytest.raises(ValueError, match=r"^n: 'x' is not of type 'integer'$"):
        parse_output(SCHEMA, {"n": "x"})


def test_a_recorded_value_is_typed_again_and_back_to_json() -> None:
    typed = retyped(Count, {"files": 1, "names": []})
    assert isinstance(typed, Count) and retyped(Count, typed) is typed
    assert retyped(SCHEMA, {"n": 1}) == {"n": 1} and retyped(None, {"n": 1}) == {"n": 1}
    assert json_value(typed) == {"files": 1, "names": []} and json_value({"n": 1}) == {"n": 1}
    assert json_value(Count) is Count  # a class is not a value to dump


def test_the_mismatch_line_keeps_the_cli_s_last_error() -> None:
    cli = ("Failed to provide valid structured output after 2 attempts — last StructuredOutput error: "
           "Output does not match required schema: /n: must be integer")
    assert output_mismatch(cli) == ("the reply did not match the output type after one retry: Output does not "
                                    "match required schema: /n: must be integer")
    assert output_mismatch("something else") == "the reply did not match the output type after one retry: something else"


def test_a_checkpointed_instance_is_the_instance_where_its_class_is_and_its_data_elsewhere() -> None:
    module = types.ModuleType("flower_target_0123456789abcdef")  # a workflow file, as the loader names it
    exec("from pydantic import BaseModel\nclass Found(BaseModel):\n    files: int\n", module.__dict__)
    found = module.__dict__["Found"]
    found.__module__ = module.__name__
    sys.modules[module.__name__] = module
    try:
        checkpointable(found)
        stored = pickle.dumps({"count": found(files=2)})
        assert pickle.loads(stored) == {"count": found(files=2)}
    finally:
        del sys.modules[module.__name__]
    # a process that never loaded the workflow's file reads the data, and no error
    assert pickle.loads(stored) == {"count": {"files": 2}}
