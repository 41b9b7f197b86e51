"""Typed results: the output type a step's final reply must satisfy (issue #28 item 2).

An output type is a pydantic model class or a JSON schema (a mapping whose top level is an object
schema). The bundled CLI enforces it: given the SDK's `output_format` (its `--json-schema`), it offers the
main thread a `StructuredOutput` tool taking that schema, checks each call's input against it, answers a
mismatch with the schema error so the same session can try again, and ends the query with
`error_max_structured_output_retries` after `MAX_STRUCTURED_OUTPUT_RETRIES` failed calls. flower sets that
to two: one retry in the same session. A reply that never calls the tool is reminded once by the CLI and
then ends without a value, which flower reports as a failure.

Invariants:
- An output type is checked when it is given (`output_schema`): anything else is one `ConfigError` line.
- The value the CLI accepted is validated once more by the type itself (`parse_output`), so a pydantic
  model's own validators hold too; the typed value is a model instance, or the plain JSON value for a schema.
- `json_value` turns a typed value back into plain JSON (manifest rows, `--json`), never by `str()`.
- A model used as a step's output type pickles (DBOS checkpoints) as its module, class name and data
  (`checkpointable`): a process that has the class reads the instance back, any other process (`flower runs`,
  which never loads the workflow's file) reads the plain data instead of failing.
"""

from __future__ import annotations

import copyreg
import importlib
import sys
from collections.abc import Mapping
from typing import Any, TypeGuard

from flower.errors import ConfigError
from flower.util.oneline import first_line, one_line

__all__ = ["OUTPUT_RETRIES_SPENT", "OUTPUT_RETRY_ENV", "OUTPUT_TOOL", "OutputType", "checkpointable", "json_value",
           "output_env", "output_format", "output_mismatch", "output_schema", "parse_output", "retyped"]

OutputType = Any
"""A pydantic `BaseModel` subclass or a JSON schema mapping (checked by `output_schema`)."""

OUTPUT_TOOL = "StructuredOutput"
"""The tool the CLI adds to the main thread when it is given a schema; the final reply is a call to it."""
OUTPUT_RETRY_ENV = "MAX_STRUCTURED_OUTPUT_RETRIES"
"""The CLI's cap on failed StructuredOutput calls in one query (its default is 5)."""
OUTPUT_ATTEMPTS = 2
"""The first answer and one retry in the same session."""
OUTPUT_RETRIES_SPENT = "error_max_structured_output_retries"
"""The subtype of the CLI's result when every attempt missed the schema."""


def _is_model(value: Any) -> TypeGuard[type[Any]]:
    if not isinstance(value, type):
        return False
    from pydantic import BaseModel

    return issubclass(value, BaseModel)


def output_schema(output_type: OutputType, owner: str = "output_type") -> dict[str, Any]:
    """The JSON schema of `output_type`, or one ConfigError line naming `owner` and what is wrong."""
    if _is_model(output_type):
        try:
            schema: dict[str, Any] = output_type.model_json_schema()
        except Exception as exc:  # noqa: BLE001 - the user's model: one line
            raise ConfigError(f"{owner}: {output_type.__name__} has no JSON schema: {one_line(exc)}") from None
    elif isinstance(output_type, Mapping):
        schema = dict(output_type)
        _check_schema(schema, owner)
    else:
        shown = output_type.__name__ if isinstance(output_type, type) else f"{type(output_type).__name__} " \
                                                                           f"{output_type!r}"[:80]
        raise ConfigError(f"{owner} must be a pydantic model class or a JSON schema (a dict), not {shown}")
    if schema.get("type") != "object":
        raise ConfigError(f"{owner}: the schema's top level must be an object (\"type\": \"object\"), not "
                          f"{schema.get('type')!r}: the reply is a tool call, whose input is an object")
    return schema


def _check_schema(schema: dict[str, Any], owner: str) -> None:
    from jsonschema import SchemaError
    from jsonschema.validators import validator_for

    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.path) or "top level"
        raise ConfigError(f"{owner} is not a valid JSON schema ({where}): {first_line(exc.message)}") from None


def output_format(output_type: OutputType) -> dict[str, Any]:
    """The SDK's `output_format` for `output_type`."""
    return {"type": "json_schema", "schema": output_schema(output_type)}


def output_mismatch(cli_error: str) -> str:
    """The step's one-line error when the reply missed the schema twice, from the CLI's own error text."""
    _, found, last = cli_error.partition("last StructuredOutput error: ")
    return f"the reply did not match the output type after one retry: {last if found else cli_error}"


def output_env() -> dict[str, str]:
    """The CLI environment that allows one retry of a reply that does not match."""
    return {OUTPUT_RETRY_ENV: str(OUTPUT_ATTEMPTS)}


def parse_output(output_type: OutputType, value: Any) -> Any:
    """The typed value of what the CLI accepted: a model instance, or the JSON value checked against the
    schema. A mismatch is a ValueError whose text is one line."""
    if _is_model(output_type):
        from pydantic import ValidationError

        try:
            return output_type.model_validate(value)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors())
            raise ValueError(f"{output_type.__name__}: {problems}") from None
    from jsonschema import ValidationError as SchemaMismatch
    from jsonschema.validators import validator_for

    schema = output_schema(output_type)
    try:
        validator_for(schema)(schema).validate(value)
    except SchemaMismatch as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "value"
        raise ValueError(f"{where}: {first_line(exc.message)}") from None
    return value


def retyped(output_type: OutputType | None, value: Any) -> Any:
    """A value recorded as plain JSON (a checkpoint) as its typed value again; a typed value as it is."""
    if output_type is None or value is None or not _is_model(output_type) or isinstance(value, output_type):
        return value
    return parse_output(output_type, value)


def checkpointable(output_type: OutputType | None) -> None:
    """Make instances of a model output type pickle by module, class name and data (see the invariants)."""
    if _is_model(output_type) and output_type not in copyreg.dispatch_table:
        copyreg.pickle(output_type, _reduce_model)


def _reduce_model(value: Any) -> tuple[Any, tuple[str, str, Any]]:
    kind = type(value)
    return _restore_model, (kind.__module__, kind.__qualname__, value.model_dump())


def _restore_model(module: str, qualname: str, data: Any) -> Any:
    """A pickled model instance: the instance when this process has its class, else its plain data."""
    owner: Any = sys.modules.get(module)
    if owner is None and not module.startswith("flower_target_"):  # a file target is only ever loaded by flower
        try:
            owner = importlib.import_module(module)
        except Exception:  # noqa: BLE001 - the class is not here: the data is
            return data
    for part in qualname.split("."):
        owner = getattr(owner, part, None)
    if not _is_model(owner):
        return data
    try:
        return owner.model_validate(data)
    except Exception:  # noqa: BLE001 - the class changed since: the data is still readable
        return data


def json_value(value: Any) -> Any:
    """A typed value as plain JSON data (a pydantic model's `model_dump(mode="json")`)."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) and not isinstance(value, type) else value
