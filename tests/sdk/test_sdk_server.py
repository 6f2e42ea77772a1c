"""hive_bash.sdk.server on the installed SDK line, without HTTP: the schema a model is sent, the
argument check before the SDK's own, and a tool's error as the model reads it."""

from __future__ import annotations

from typing import Any

import pytest

from hive_bash.sdk import server as sdk

pytestmark = pytest.mark.anyio


def test_slim_schema_drops_titles_and_the_null_option() -> None:
    schema = {
        "title": "runArguments",
        "type": "object",
        "properties": {
            "cmd": {"title": "Cmd", "type": "string"},
            "name": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Name"},
            "wait": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": 30, "title": "Wait"},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}], "title": "Either"},
        },
        "required": ["cmd"],
    }
    assert sdk.slim_schema(schema) == {
        "type": "object",
        "properties": {
            "cmd": {"type": "string"},
            "name": {"type": "string"},
            "wait": {"type": "number", "default": 30},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        },
        "required": ["cmd"],
    }
    assert sdk.slim_schema([{"title": "x"}, 3]) == [{}, 3]


def test_a_tool_result_carries_text_and_structure_on_either_line() -> None:
    result = sdk.tool_result("done", {"id": "web"})
    dumped = result.model_dump(by_alias=True, exclude_none=True)
    assert dumped["content"] == [{"type": "text", "text": "done"}]
    assert dumped["structuredContent"] == {"id": "web"} and dumped["isError"] is False


def make_server(check: sdk.ArgumentCheck | None = None) -> sdk.McpServer:
    server = sdk.create_server(name="t", instructions="instructions", version="1.0", check_arguments=check)

    def echo(text: str, times: int = 1) -> dict[str, Any]:
        """Echo."""
        if times < 0:
            raise sdk.ToolError("times: must be at least 0")
        return {"text": text * times}

    sdk.add_tool(server, echo, name="echo", description="Echo the text.")
    return server


async def test_the_argument_check_sees_the_raw_arguments_before_the_sdk() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    def check(name: str, schema: dict[str, Any], arguments: dict[str, Any]) -> None:
        seen.append((name, arguments))
        if set(arguments) - set(schema["properties"]):
            raise sdk.ToolError(f"unknown argument {sorted(set(arguments) - set(schema['properties']))[0]}")

    server = make_server(check)
    with pytest.raises(sdk.ToolError, match="^unknown argument colour$"):
        await server.call_tool("echo", {"text": "a", "colour": "red"})
    assert seen == [("echo", {"text": "a", "colour": "red"})]


async def test_a_tools_own_error_reaches_the_model_without_the_sdks_prefix() -> None:
    server = make_server()
    with pytest.raises(sdk.ToolError) as refused:
        await server.call_tool("echo", {"text": "a", "times": -1})
    assert str(refused.value) == "times: must be at least 0"


async def test_the_listed_schema_is_slim_and_an_argument_can_be_hidden() -> None:
    server = make_server()
    tools = await server.list_tools()
    assert [tool.name for tool in tools] == ["echo"]
    schema = tools[0].model_dump(by_alias=True)["inputSchema"]
    assert "title" not in schema and schema["properties"]["times"] == {"type": "integer", "default": 1}
    sdk.hide_argument(server, tool="echo", argument="times")
    assert "times" not in (await server.list_tools())[0].model_dump(by_alias=True)["inputSchema"]["properties"]
