"""An MCP server built on the official Python SDK (`mcp` on PyPI) whose tools
misbehave on purpose, for Herald's end-to-end tests of MCP servers: a call
that hangs, a result of megabytes, a crash in the middle of a call, a tool
list that changes, a destructive tool, and a read-only tool that shows
whether two calls ran at the same time. Its annotations say what each tool
does (Herald's tests trust them, as an operator who configures
`trust_annotations` would).

Side effects are written to the file named by NOTES_FILE, one line per
effect, so a test can count how often one really ran; each process started
appends its pid to PIDS_FILE, so a test can check that none outlives Herald.
"""

import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("faults", instructions="Tools that misbehave on purpose, for Herald's tests.")
READ_ONLY = ToolAnnotations(read_only_hint=True)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True)
# A side effect that adds and never destroys (MCP's default is destructive).
ADDITIVE = ToolAnnotations(read_only_hint=False, destructive_hint=False)
arrivals: dict[str, int] = {}


def note(text: str) -> None:
    with open(os.environ["NOTES_FILE"], "a", encoding="utf-8") as notes:
        notes.write(text + "\n")


@server.tool(annotations=READ_ONLY)
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@server.tool(annotations=ADDITIVE)
def append_note(text: str, crash_after: bool = False) -> str:
    """Append a line to the notes file (a side effect); crash_after kills the server right after writing."""
    note(text)
    if crash_after:
        os._exit(3)
    return f"noted {text}"


@server.tool(annotations=DESTRUCTIVE)
def wipe(target: str) -> str:
    """Delete everything under a target (destructive)."""
    note(f"wiped {target}")
    return f"wiped {target}"


@server.tool(annotations=READ_ONLY)
async def hang() -> str:
    """Never answers."""
    await anyio.sleep(3600)
    return "woke up"


@server.tool(annotations=READ_ONLY)
def huge(megabytes: int) -> str:
    """Answer with this many megabytes of text, and as much on stderr."""
    chunk = "x" * 1024
    for _ in range(megabytes * 1024):
        sys.stderr.write(chunk + "\n")
    sys.stderr.flush()
    return "BEGIN" + "y" * (megabytes * 1024 * 1024) + "END"


@server.tool(annotations=READ_ONLY)
async def rendezvous(name: str) -> str:
    """Wait (up to 20 s) for a second call of this tool; say whether they met."""
    arrivals[name] = arrivals.get(name, 0) + 1
    with anyio.move_on_after(20):
        while sum(arrivals.values()) < 2:
            await anyio.sleep(0.01)
        return f"{name} met another call"
    return f"{name} waited alone"


@server.tool(annotations=ADDITIVE)
async def add_tool(ctx: Context) -> str:
    """Add a tool named fresh and tell the client the tool list changed."""

    def fresh() -> str:
        """A tool that did not exist at start."""
        return "fresh and new"

    server.add_tool(fresh, name="fresh", annotations=READ_ONLY)
    await ctx.session.send_tool_list_changed()
    return "added fresh"


if __name__ == "__main__":
    if "PIDS_FILE" in os.environ:
        with open(os.environ["PIDS_FILE"], "a", encoding="utf-8") as pids:
            pids.write(f"{os.getpid()}\n")
    server.run("stdio")
