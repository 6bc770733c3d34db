"""MCP tool arguments checked like REST parameters, refused as JSON-RPC errors.

The MCP specification (2025-06-18, "Tools: Error Handling") separates protocol errors — an unknown tool,
invalid arguments — answered with a JSON-RPC error, from failures of a tool that ran (``isError``).
The SDK's FastMCP turns every problem into the latter, and ignores arguments a tool does not take (a
misspelt ``sttus=failed`` became an empty filter). :func:`strict_arguments` wraps the server's
``tools/call`` handler: an unknown tool, an argument the tool does not declare, or a value its
signature refuses (type, range, length — the same bounds as the REST routes) is a JSON-RPC error
``-32602`` (invalid params) naming the argument, before the tool runs. The tools' input schemas say
``additionalProperties: false`` so clients see the rule.
"""

from __future__ import annotations

from typing import Any

from mcp import types
from mcp.server.fastmcp import FastMCP
from mcp.shared.exceptions import McpError
from pydantic import ValidationError


def _invalid(message: str) -> McpError:
    return McpError(types.ErrorData(code=types.INVALID_PARAMS, message=message))


def _explain(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "invalid arguments: " + "; ".join(parts)


def check_arguments(server: FastMCP, name: str, arguments: dict[str, Any]) -> None:
    """Refuse a call of tool ``name`` with ``arguments`` the tool would not take as given.

    Raises:
        McpError: ``INVALID_PARAMS`` for an unknown tool, an undeclared argument or a refused value.
    """
    tool = server._tool_manager.get_tool(name)
    if tool is None:
        raise _invalid(f"unknown tool {name!r}")
    declared = set(tool.parameters.get("properties", {}))
    unknown = sorted(set(arguments) - declared)
    if unknown:
        raise _invalid(f"unknown argument(s) {', '.join(map(repr, unknown))} for {name}; it takes: "
                       f"{', '.join(sorted(declared)) or 'none'}")
    try:
        tool.fn_metadata.arg_model.model_validate(arguments)
    except ValidationError as exc:
        raise _invalid(_explain(exc)) from exc


def strict_arguments(server: FastMCP) -> None:
    """Install :func:`check_arguments` in front of ``server``'s ``tools/call`` handler and mark every
    registered tool's input schema ``additionalProperties: false``. Call it after the tools are added."""
    lowlevel = server._mcp_server
    inner = lowlevel.request_handlers[types.CallToolRequest]

    async def handler(request: types.CallToolRequest) -> Any:
        check_arguments(server, request.params.name, request.params.arguments or {})
        return await inner(request)

    lowlevel.request_handlers[types.CallToolRequest] = handler
    for tool in server._tool_manager.list_tools():
        tool.parameters["additionalProperties"] = False
