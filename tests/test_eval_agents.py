"""The openai and anthropic agents, run with the real SDK clients against a local fake endpoint.

The fake is an HTTP server on 127.0.0.1 that answers from a script and records every request, so
the tests check the wire: what each agent sends (tools, results, quirk options) and what it makes
of the answers (tool calls, clarifications, usage, reasoning, errors). Nothing reaches a hosted API.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from conftest import free_port
from tether.eval.agents.anthropic_agent import AnthropicAgent
from tether.eval.agents.base import AgentContext, AgentError, Answer, agent_names, make_agent
from tether.eval.agents.loop import LIMIT_NOTE, LIMIT_SUFFIX, parse_value, truncate
from tether.eval.agents.openai_agent import OpenAIAgent, parse_choice
from tether.eval.cases import Case, Gold
from tether.eval.trace import ModelTurn, ToolCall

# --- the fake endpoint -----------------------------------------------------------------------


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeEndpoint:
    url: str = ""
    replies: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    script: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    """When set, every reply is the script's answer to the request (a scripted model)."""

    def reply(self, *bodies: dict[str, Any], status: int = 200) -> None:
        self.replies += [(status, b) for b in bodies]


@pytest.fixture
def fake() -> Iterator[FakeEndpoint]:
    endpoint = FakeEndpoint()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            with lock:
                endpoint.seen.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()},
                                          body))
                if endpoint.script is not None:
                    status, reply = 200, endpoint.script(body)
                else:
                    status, reply = endpoint.replies.pop(0) if endpoint.replies else (
                        500, {"error": {"message": "the fake's script ran out"}})
            data = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    endpoint.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield endpoint
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def _no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing in the environment may point a test at a hosted API."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
                "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FAKE_KEY", "sk-local-123")


def chat(content: str | None = None, *calls: dict[str, Any], finish: str = "stop",
         usage: tuple[int, int] = (10, 5), **message: Any) -> dict[str, Any]:
    """A chat.completion body."""
    msg: dict[str, Any] = {"role": "assistant", "content": content, **message}
    if calls:
        msg["tool_calls"] = list(calls)
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "served-model",
            "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                      "total_tokens": sum(usage)}}


def fn_call(call_id: str, name: str, args: dict[str, Any] | str) -> dict[str, Any]:
    raw = args if isinstance(args, str) else json.dumps(args)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


def message(*blocks: dict[str, Any], stop: str = "end_turn", usage: tuple[int, int] = (10, 5)
            ) -> dict[str, Any]:
    """An Anthropic Messages body."""
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": list(blocks), "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]}}


# --- the runner's side: tools, a case, call_tool and ask_user --------------------------------

REVENUE_SCHEMA = {"type": "object", "properties": {"year": {"type": "integer"}}, "required": ["year"]}
TOOLS: list[dict[str, Any]] = [
    {"name": "net_revenue", "description": "Net revenue in EUR for a fiscal year.",
     "inputSchema": REVENUE_SCHEMA, "outputSchema": {"type": "object"},
     "_meta": {"tether/context": {"version": "1.0.0"}}},
    {"name": "orders.count", "description": "How many orders there are.", "inputSchema": {}},
]


@dataclass
class Runner:
    """Stands in for `tether eval run`: answers tool calls and clarifications, keeps the turns."""

    results: dict[str, ToolCall | str] = field(default_factory=dict)
    calls: list[tuple[str, dict[str, Any], int]] = field(default_factory=list)
    questions: list[tuple[str, int]] = field(default_factory=list)
    turns: list[ModelTurn] = field(default_factory=list)
    user_says: str = "The fiscal year."

    def ctx(self, max_turns: int = 6, tools: list[dict[str, Any]] | None = None) -> AgentContext:
        case = Case(case_id="rev-2024", user_role="analyst", as_user="ana",
                    question="What was net revenue in 2024?", gold=Gold(answer=1234.5))

        async def call_tool(name: str, args: dict[str, Any], turn: int) -> ToolCall:
            self.calls.append((name, args, turn))
            got = self.results.get(name, "no result scripted")
            if isinstance(got, ToolCall):
                return got
            return ToolCall(index=len(self.calls) - 1, turn=turn, name=name, arguments=args, text=got)

        def ask_user(question: str, turn: int) -> str:
            self.questions.append((question, turn))
            return self.user_says

        return AgentContext(case=case, tools=TOOLS if tools is None else tools, call_tool=call_tool,
                            ask_user=ask_user, record_turn=self.turns.append, max_turns=max_turns)

    @property
    def kinds(self) -> list[str]:
        return [t.kind for t in self.turns]


def run(agent: OpenAIAgent | AnthropicAgent, ctx: AgentContext) -> Answer:
    return asyncio.run(agent.run(ctx))


def openai_agent(fake: FakeEndpoint, **options: str) -> OpenAIAgent:
    return OpenAIAgent({"model": "qwen-local", "base_url": fake.url + "/v1", "api_key_env": "FAKE_KEY",
                        **options})


# --- openai ----------------------------------------------------------------------------------


def test_openai_multi_step_tool_conversation(fake: FakeEndpoint) -> None:
    fake.reply(
        chat(None, fn_call("call_1", "net_revenue", {"year": 2024}), fn_call("call_2", "orders_count", ""),
             finish="tool_calls", usage=(100, 20), reasoning_content="Revenue first."),
        chat("Net revenue in 2024 was 1,234.5 EUR.", usage=(150, 12)))
    runner = Runner(results={"net_revenue": '{"net_revenue": 1234.5}', "orders.count": "17"})
    answer = run(openai_agent(fake), runner.ctx())

    assert answer == Answer(text="Net revenue in 2024 was 1,234.5 EUR.", value=None, model="qwen-local")
    assert runner.calls == [("net_revenue", {"year": 2024}, 0), ("orders.count", {}, 0)]
    first, second = (s.body for s in fake.seen)
    assert [s.path for s in fake.seen] == ["/v1/chat/completions"] * 2
    assert fake.seen[0].headers["authorization"] == "Bearer sk-local-123"
    assert first["model"] == "qwen-local" and first["temperature"] == 0
    assert first["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in first["tools"]] == ["net_revenue", "orders_count", "ask_user"]
    assert first["tools"][0] == {"type": "function", "function": {
        "name": "net_revenue", "description": "Net revenue in EUR for a fiscal year.",
        "parameters": REVENUE_SCHEMA}}
    assert first["tools"][1]["function"]["parameters"] == {"type": "object", "properties": {}}
    system, user = first["messages"]
    assert system["role"] == "system" and "ask_user" in system["content"]
    assert user == {"role": "user", "content": "What was net revenue in 2024?"}
    assistant, r1, r2 = second["messages"][2:]
    assert assistant["content"] == ""  # never null: llama.cpp answers HTTP 500 to that
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_1", "call_2"]
    assert assistant["tool_calls"][0]["function"] == {"name": "net_revenue", "arguments": '{"year": 2024}'}
    assert r1 == {"role": "tool", "tool_call_id": "call_1", "content": '{"net_revenue": 1234.5}'}
    assert r2 == {"role": "tool", "tool_call_id": "call_2", "content": "17"}

    assert runner.kinds == ["model", "answer"]
    assert [(t.usage.input_tokens, t.usage.output_tokens) for t in runner.turns] == [(100, 20), (150, 12)]
    assert runner.turns[0].reasoning == "Revenue first." and runner.turns[1].reasoning is None
    assert [c.name for c in runner.turns[0].tool_calls] == ["net_revenue", "orders.count"]
    assert [t.finish_reason for t in runner.turns] == ["tool_calls", "stop"]
    assert all(t.latency_ms > 0 for t in runner.turns)


def test_openai_clarification_goes_to_the_user(fake: FakeEndpoint) -> None:
    fake.reply(chat(None, fn_call("c1", "ask_user", {"question": "Fiscal or calendar 2024?"}),
                    finish="tool_calls"),
               chat("1,234.5"))
    runner = Runner()
    answer = run(openai_agent(fake), runner.ctx())

    assert runner.questions == [("Fiscal or calendar 2024?", 0)] and runner.calls == []
    assert runner.kinds == ["clarification", "answer"]
    assert runner.turns[0].tool_calls[0].arguments == {"question": "Fiscal or calendar 2024?"}
    assert fake.seen[1].body["messages"][-1] == {"role": "tool", "tool_call_id": "c1",
                                                 "content": "The fiscal year."}
    assert answer.value == 1234.5


def test_openai_max_turns_forces_an_answer(fake: FakeEndpoint) -> None:
    call = fn_call("c", "net_revenue", {"year": 2024})
    fake.reply(chat(None, call, finish="tool_calls"), chat(None, call, finish="tool_calls"),
               chat("About 1200 EUR.", call, finish="tool_calls"))  # ignores tool_choice=none
    runner = Runner(results={"net_revenue": "1234.5"})
    answer = run(openai_agent(fake), runner.ctx(max_turns=3))

    assert len(fake.seen) == 3 and len(runner.turns) == 3 and len(runner.calls) == 2
    assert [s.body["tool_choice"] for s in fake.seen] == ["auto", "auto", "none"]
    assert fake.seen[2].body["messages"][-1] == {"role": "user", "content": LIMIT_NOTE}
    assert runner.kinds == ["model", "model", "answer"]
    assert answer.text == f"About 1200 EUR.\n\n{LIMIT_SUFFIX}" and answer.value is None


def test_openai_llamacpp_quirk_options(fake: FakeEndpoint) -> None:
    fake.reply(chat(None, fn_call("c", "net_revenue", {"year": 2024}), finish="tool_calls"),
               chat("1234.5 EUR"))
    runner = Runner(results={"net_revenue": "1234.5"})
    run(openai_agent(fake, tool_result_role="user", after_tool_choice="none"), runner.ctx())

    first, second = (s.body for s in fake.seen)
    assert first["tool_choice"] == "auto" and second["tool_choice"] == "none"
    assert "tools" in second  # the tools stay declared; only the choice changes
    assert all(m["role"] != "tool" for m in second["messages"])
    assert second["messages"][-2]["content"] == ""
    assert second["messages"][-1] == {"role": "user",
                                      "content": 'Result of net_revenue({"year": 2024}):\n1234.5'}


def test_openai_quirk_options_still_allow_a_data_call_after_a_clarification(
        fake: FakeEndpoint) -> None:
    # after_tool_choice=none forbids tools after a tool RESULT; the user's answer to ask_user is not
    # one, so the next request must still offer the data tools with the first-turn tool_choice
    fake.reply(chat(None, fn_call("q", "ask_user", {"question": "Fiscal or calendar?"}),
                    finish="tool_calls"),
               chat(None, fn_call("c", "net_revenue", {"year": 2024}), finish="tool_calls"),
               chat("1234.5 EUR"))
    runner = Runner(results={"net_revenue": "1234.5"})
    run(openai_agent(fake, tool_result_role="user", after_tool_choice="none"), runner.ctx())

    assert [s.body["tool_choice"] for s in fake.seen] == ["auto", "auto", "none"]
    assert runner.kinds == ["clarification", "model", "answer"]
    assert runner.calls == [("net_revenue", {"year": 2024}, 1)]
    assert fake.seen[1].body["messages"][-1] == {"role": "user",
                                                 "content": "The user answered: The fiscal year."}


def test_openai_describe_tools_and_today_reach_the_system_prompt(fake: FakeEndpoint) -> None:
    fake.reply(chat("1"))
    run(openai_agent(fake, describe_tools="system", today="2026-08-20"), Runner().ctx())
    system = fake.seen[0].body["messages"][0]["content"]
    # a chat format that drops tool descriptions from the prompt still shows them to the model
    assert "- net_revenue: Net revenue in EUR for a fiscal year." in system
    assert "Today's date is 2026-08-20." in system
    assert fake.seen[0].body["tools"][0]["function"]["description"]  # still sent natively too
    fake.reply(chat("1"))
    run(openai_agent(fake), Runner().ctx())
    plain = fake.seen[1].body["messages"][0]["content"]
    assert "net_revenue:" not in plain and "Today's date" not in plain
    with pytest.raises(AgentError, match="today='last tuesday' is not a date"):
        openai_agent(fake, today="last tuesday")
    with pytest.raises(AgentError, match="describe_tools='both' is not one of"):
        openai_agent(fake, describe_tools="both")


@pytest.mark.parametrize(("option", "sent"), [("", ""), ("null", None), ("omit", "absent")])
def test_openai_empty_content_option(fake: FakeEndpoint, option: str, sent: str | None) -> None:
    fake.reply(chat(None, fn_call("c", "net_revenue", {"year": 2024}), finish="tool_calls"), chat("1"))
    run(openai_agent(fake, empty_content=option), Runner().ctx())
    assistant = fake.seen[1].body["messages"][2]
    assert assistant["role"] == "assistant"
    assert assistant.get("content", "absent") == sent


def test_openai_options_shape_the_request(fake: FakeEndpoint) -> None:
    fake.reply(chat(None, fn_call("c", "net_revenue", {"year": 2024}), finish="tool_calls"), chat("ok"))
    runner = Runner(results={"net_revenue": "x" * 50})
    run(openai_agent(fake, clarify="false", max_result_chars="10", temperature="0.3", max_tokens="64",
                     system="Answer in EUR.", tool_choice="required", after_tool_choice="unset",
                     extra_body='{"top_k": 1}'), runner.ctx())

    first, second = (s.body for s in fake.seen)
    assert [t["function"]["name"] for t in first["tools"]] == ["net_revenue", "orders_count"]
    assert "ask_user" not in first["messages"][0]["content"]
    assert first["messages"][0]["content"].endswith("Answer in EUR.")
    assert (first["temperature"], first["max_tokens"], first["top_k"]) == (0.3, 64, 1)
    assert first["tool_choice"] == "required" and "tool_choice" not in second
    assert second["messages"][-1]["content"] == "x" * 10 + "\n[truncated: the first 10 of 50 characters]"


def test_openai_tool_error_and_bad_arguments(fake: FakeEndpoint) -> None:
    fake.reply(chat(None, fn_call("a", "net_revenue", "{not json"), fn_call("b", "orders_count", "{}"),
                    finish="tool_calls"),
               chat("I could not get it."))
    failed = ToolCall(index=0, turn=0, name="orders.count", text="permission denied", is_error=True)
    runner = Runner(results={"orders.count": failed})
    run(openai_agent(fake), runner.ctx())

    assert runner.calls == [("orders.count", {}, 0)]  # the bad call never reaches the server
    bad, denied = fake.seen[1].body["messages"][3:]
    assert bad["tool_call_id"] == "a" and bad["content"].startswith("Error: the arguments were not")
    assert denied == {"role": "tool", "tool_call_id": "b", "content": "Error: permission denied"}


def test_openai_constrained_json_loop(fake: FakeEndpoint) -> None:
    """The model's {"answer": ...} choice is the answer: no plain step follows to ask again
    (a second reply could contradict the first: on a held-out run a right refusal became 0)."""
    fake.reply(chat('{"tool": "net_revenue", "arguments": {"year": 2024}}', usage=(300, 15)),
               chat('{"answer": "Net revenue in 2024 was 1,234.5 EUR."}'),
               chat("never asked"))
    runner = Runner(results={"net_revenue": "1234.5"})
    answer = run(openai_agent(fake, constrained="true"), runner.ctx())

    assert answer.text == "Net revenue in 2024 was 1,234.5 EUR."
    assert runner.calls == [("net_revenue", {"year": 2024}, 0)]
    assert runner.kinds == ["model", "answer"] and len(fake.seen) == 2
    assert runner.turns[0].usage.input_tokens == 300
    first, second = (s.body for s in fake.seen)
    assert "tools" not in first and "tool_choice" not in first
    fmt = first["response_format"]
    assert fmt["type"] == "json_object"
    choices = fmt["schema"]["anyOf"]
    assert choices[0] == {"type": "object", "required": ["tool", "arguments"],
                          "properties": {"tool": {"const": "net_revenue"}, "arguments": REVENUE_SCHEMA}}
    assert [c["properties"].get("tool", {}).get("const") for c in choices] == [
        "net_revenue", "orders_count", "ask_user", None]
    assert choices[-1] == {"type": "object", "properties": {"answer": {"type": "string"}},
                           "required": ["answer"]}
    assert "net_revenue: Net revenue in EUR" in first["messages"][0]["content"]
    assert second["messages"][-2] == {"role": "assistant",
                                      "content": '{"tool": "net_revenue", "arguments": {"year": 2024}}'}
    assert second["messages"][-1] == {"role": "user",
                                      "content": 'Result of net_revenue({"year": 2024}):\n1234.5'}
    assert second["response_format"] == fmt


def test_openai_ask_again_scores_the_plain_reply_and_keeps_the_choice(fake: FakeEndpoint) -> None:
    """ask_again (measurement only): the answer choice is asked again in plain text; the reply is
    the answer, the choice its draft, both requests' tokens counted on the one answer turn."""
    fake.reply(chat('{"tool": "net_revenue", "arguments": {"year": 2024}}'),
               chat('{"answer": "Not permitted: outside your scope"}', usage=(200, 9)),
               chat("0", usage=(210, 1)))
    runner = Runner(results={"net_revenue": "1234.5"})
    answer = run(openai_agent(fake, constrained="true", ask_again="true"), runner.ctx())

    assert answer.text == "0"
    assert runner.kinds == ["model", "answer"] and len(fake.seen) == 3
    last = runner.turns[-1]
    assert last.draft == "Not permitted: outside your scope" and last.content == "0"
    assert (last.usage.input_tokens, last.usage.output_tokens) == (410, 10)
    third = fake.seen[2].body
    assert "response_format" not in third
    assert third["messages"][-1]["content"].endswith(
        "Now give your final answer to the question, stating the number or value clearly. "
        "Reply in plain text, not JSON.")
    assert third["messages"][-1]["content"].startswith('Result of net_revenue({"year": 2024})')


def test_openai_constrained_clarification_and_json_schema_format(fake: FakeEndpoint) -> None:
    fake.reply(chat('{"tool": "ask_user", "arguments": {"question": "Which year?"}}'),
               chat('{"answer": "1234.5"}'))
    runner = Runner(user_says="2024.")
    answer = run(openai_agent(fake, constrained="true", constrained_format="json_schema"), runner.ctx())

    assert runner.questions == [("Which year?", 0)] and runner.kinds == ["clarification", "answer"]
    assert fake.seen[0].body["response_format"]["type"] == "json_schema"
    assert fake.seen[1].body["messages"][-1] == {"role": "user", "content": "The user answered: 2024."}
    assert answer.text == "1234.5" and answer.value == 1234.5


def test_openai_http_error_names_the_endpoint(fake: FakeEndpoint) -> None:
    fake.reply({"error": {"message": "Internal error: content is None"}}, status=500)
    with pytest.raises(AgentError) as err:
        run(openai_agent(fake, max_retries="0"), Runner().ctx())
    text = str(err.value)
    assert f"endpoint {fake.url}/v1 answered HTTP 500: Internal error: content is None" in text
    assert "empty_content" in text and "Traceback" not in text


def test_openai_unreachable_endpoint() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    agent = OpenAIAgent({"model": "m", "base_url": url, "max_retries": "0", "timeout": "5"})
    with pytest.raises(AgentError, match=f"could not reach the OpenAI-compatible endpoint {url}"):
        run(agent, Runner().ctx())


def test_options_are_checked_when_the_agent_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AgentError, match="needs a model") as err:
        make_agent("openai", {"base_url": "http://127.0.0.1:1/v1"})
    assert err.value.hint is not None and "model=" in err.value.hint
    with pytest.raises(AgentError, match="unknown option 'temprature'"):
        make_agent("openai", {"model": "m", "base_url": "http://x/v1", "temprature": "0"})
    with pytest.raises(AgentError, match="tool_result_role='system' is not one of"):
        make_agent("openai", {"model": "m", "base_url": "http://x/v1", "tool_result_role": "system"})
    with pytest.raises(AgentError, match="OPENAI_API_KEY is not set"):
        make_agent("openai", {"model": "gpt-test"})  # hosted default endpoint, no key
    with pytest.raises(AgentError, match="MY_KEY is not set"):
        make_agent("anthropic", {"model": "claude-test", "api_key_env": "MY_KEY"})
    with pytest.raises(AgentError, match="MY_KEY is not set"):  # named, so meant to be there
        make_agent("openai", {"model": "m", "base_url": "http://127.0.0.1:1/v1", "api_key_env": "MY_KEY"})
    with pytest.raises(AgentError, match="thinking='lots' is not off, adaptive or a budget"):
        make_agent("anthropic", {"model": "c", "api_key_env": "FAKE_KEY", "thinking": "lots"})
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")  # a local server needs no key
    assert make_agent("openai", {"model": "m"}).describe() == "m"


def test_agents_are_registered() -> None:
    assert {"openai", "anthropic"} <= set(agent_names())
    agent = make_agent("openai", {"model": "qwen", "base_url": "http://127.0.0.1:1/v1"})
    assert isinstance(agent, OpenAIAgent) and agent.describe() == "qwen"
    assert isinstance(make_agent("anthropic", {"model": "claude", "api_key_env": "FAKE_KEY"}),
                      AnthropicAgent)


def test_a_long_json_result_is_cut_inside_its_list_keeping_the_fields_after_it() -> None:
    rows = [{"order_id": i, "status": "SHIPPED"} for i in range(200)]
    text = json.dumps({"rows": rows, "row_count": 200, "truncated": True, "next_cursor": "abc"})
    cut = truncate(text, 600)
    assert len(cut) <= 600
    body, note = cut.rsplit("\n", 1)
    kept = json.loads(body)
    # a model that counts rows needs row_count and the cursor, which come after the list
    assert (kept["row_count"], kept["truncated"], kept["next_cursor"]) == (200, True, "abc")
    assert kept["rows"] == rows[:len(kept["rows"])] and 5 < len(kept["rows"]) < 200
    assert note == f"[shortened by the agent: the first {len(kept['rows'])} of 200 items of 'rows']"
    assert truncate("plain " * 50, 20) == "plain " * 3 + "pl\n[truncated: the first 20 of 300 characters]"
    long_sql = json.dumps({"sql": "x" * 500})
    assert truncate(long_sql, 50).endswith("[truncated: the first 50 of 511 characters]")
    assert truncate(text, 0) == text
    # an answer sentence first, then the JSON: the sentence whole, the JSON cut inside its list
    first = "200 matching rows in all, every one shown; as of 2026-08-20T08:00:00+00:00."
    both = truncate(first + "\n" + text, 600)
    assert len(both) <= 600 and both.startswith(first + "\n")
    body = both[len(first) + 1:].rsplit("\n", 1)[0]
    assert json.loads(body)["next_cursor"] == "abc"
    from tether.eval.trace import parse_text

    assert parse_text(first + "\n" + text) == json.loads(text)


def test_parsing_helpers() -> None:
    assert [parse_value(s) for s in ("42", "1,234.5", "-3.", " 7 ", "42 EUR", "1,23", "about 4")] == [
        42, 1234.5, -3, 7, None, None, None]
    assert parse_choice('{"tool": "t", "arguments": {"a": 1}}') == ("t", {"a": 1})
    assert parse_choice('{"answer": 5}') == "5"
    assert parse_choice("plain words") is None


# --- anthropic -------------------------------------------------------------------------------


def anthropic_agent(fake: FakeEndpoint, **options: str) -> AnthropicAgent:
    return AnthropicAgent({"model": "claude-test", "base_url": fake.url, "api_key_env": "FAKE_KEY",
                           **options})


def test_anthropic_multi_step_tool_conversation(fake: FakeEndpoint) -> None:
    fake.reply(
        message({"type": "thinking", "thinking": "Revenue, then orders.", "signature": "sig1"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "net_revenue", "input": {"year": 2024}},
                {"type": "tool_use", "id": "toolu_2", "name": "orders_count", "input": {}},
                stop="tool_use", usage=(200, 30)),
        message({"type": "text", "text": "Net revenue in 2024 was 1,234.5 EUR."}, usage=(260, 15)))
    denied = ToolCall(index=1, turn=0, name="orders.count", text="permission denied", is_error=True)
    runner = Runner(results={"net_revenue": "1234.5", "orders.count": denied})
    answer = run(anthropic_agent(fake, temperature="0"), runner.ctx())

    assert answer == Answer(text="Net revenue in 2024 was 1,234.5 EUR.", value=None, model="claude-test")
    assert runner.calls == [("net_revenue", {"year": 2024}, 0), ("orders.count", {}, 0)]
    assert [s.path for s in fake.seen] == ["/v1/messages"] * 2
    assert fake.seen[0].headers["authorization"] == "Bearer sk-local-123"  # SDK 2.x: Bearer, not x-api-key
    assert "anthropic-version" in fake.seen[0].headers
    first, second = (s.body for s in fake.seen)
    assert first["model"] == "claude-test" and first["max_tokens"] == 1024
    assert first["temperature"] == 0  # only when asked for: the SDK no longer has the parameter
    assert "ask_user" in first["system"] and "tool_choice" not in first
    assert first["messages"] == [{"role": "user", "content": "What was net revenue in 2024?"}]
    assert first["tools"][0] == {"name": "net_revenue", "input_schema": REVENUE_SCHEMA,
                                 "description": "Net revenue in EUR for a fiscal year."}
    assert [t["name"] for t in first["tools"]] == ["net_revenue", "orders_count", "ask_user"]
    assistant, results = second["messages"][1:]
    assert assistant == {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Revenue, then orders.", "signature": "sig1"},
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "net_revenue", "input": {"year": 2024}},
        {"type": "tool_use", "id": "toolu_2", "name": "orders_count", "input": {}}]}
    assert results == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "1234.5", "is_error": False},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "permission denied",
         "is_error": True}]}

    assert runner.kinds == ["model", "answer"]
    assert [(t.usage.input_tokens, t.usage.output_tokens) for t in runner.turns] == [(200, 30), (260, 15)]
    assert runner.turns[0].reasoning == "Revenue, then orders."
    assert runner.turns[0].content == "Let me look." and runner.turns[0].finish_reason == "tool_use"
    assert [c.name for c in runner.turns[0].tool_calls] == ["net_revenue", "orders.count"]


def test_anthropic_clarification_at_the_turn_limit_with_thinking(fake: FakeEndpoint) -> None:
    fake.reply(message({"type": "tool_use", "id": "t1", "name": "ask_user",
                        "input": {"question": "Fiscal or calendar?"}}, stop="tool_use"),
               message({"type": "redacted_thinking", "data": "xyz"}, {"type": "text", "text": "1234.5"}))
    runner = Runner()
    answer = run(anthropic_agent(fake, thinking="2048"), runner.ctx(max_turns=2))

    assert runner.questions == [("Fiscal or calendar?", 0)] and runner.kinds == ["clarification", "answer"]
    first, second = (s.body for s in fake.seen)
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "temperature" not in first and first["max_tokens"] == 1024 + 2048
    assert second["tool_choice"] == {"type": "none"}
    assert second["messages"][-1]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "The fiscal year.", "is_error": False},
        {"type": "text", "text": LIMIT_NOTE}]
    assert runner.turns[1].reasoning == "[redacted thinking]"
    assert answer.text == f"1234.5\n\n{LIMIT_SUFFIX}" and answer.value == 1234.5


def test_anthropic_http_error_names_the_endpoint(fake: FakeEndpoint) -> None:
    fake.reply({"type": "error", "error": {"type": "api_error", "message": "Overloaded"}}, status=500)
    with pytest.raises(AgentError) as err:
        run(anthropic_agent(fake, max_retries="0"), Runner().ctx())
    assert f"the Anthropic endpoint {fake.url} answered HTTP 500: Overloaded" in str(err.value)


# --- a real server whose list changes ---------------------------------------------------------


def test_the_agent_lists_again_when_the_server_says_so(fake: FakeEndpoint, demo_dir: Any,
                                                       tmp_path: Any) -> None:
    """Against tether served discovery-only over stdio (`tether eval run`, the real runner): a
    search mounts the product's tool, the runner lists again after that turn, the next model
    request offers the mounted tool and its call is recorded with the tool's version; the next
    case of the same user starts from the list a new client sees."""
    import sys
    from pathlib import Path

    from conftest import copy_project, run_cli
    from tether.config import load_project
    from tether.drift.publish import build
    from tether.eval.trace import Trace

    d = copy_project(demo_dir, tmp_path / "p")
    build(load_project(d))
    case = {"source_trace": None, "user_role": "finance_analyst", "as_user": "fin.ana",
            "question": "How many deals were lost?", "gold": {"answer": 1, "tolerance": 0},
            "label": {"correct": None, "grounded": None, "failure_class": None, "note": None},
            "cost": None}
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"case_id": f"c{i}", **case}) + "\n" for i in (1, 2)))
    found = "deals_by_stage_and_pipeline"
    for _ in range(2):  # each case: search, the mounted tool, an answer
        fake.reply(chat(None, fn_call("s", "find_data_for_question",
                                      {"question": "which have CLOSED_LOST?"}),
                        finish="tool_calls"),
                   chat(None, fn_call("d", found, {"stage": ["CLOSED_LOST"], "limit": 1}),
                        finish="tool_calls"),
                   chat("Some deals were lost."))
    tether = str(Path(sys.executable).parent / "tether")
    out = tmp_path / "run"
    r = run_cli("eval", "run", "--server",
                f"stdio:{tether} serve --project {d} --dedicated-tools none",
                "--cases", str(cases), "--agent", "openai", "--agent-option", "model=m",
                "--agent-option", f"base_url={fake.url}/v1", "--out", str(out),
                "--concurrency", "1", env={"OPENAI_API_KEY": "k"})
    assert r.returncode == 0, r.stderr
    offered = [[t["function"]["name"] for t in s.body.get("tools", [])] for s in fake.seen]
    assert len(offered) == 6
    # the server's instructions (its initialize result) reach the model, as real clients do,
    # and a discovery-only server says the way to its products there
    system = fake.seen[0].body["messages"][0]["content"]
    assert "The data server says: Some data products have no tool of their own" in system
    assert "call find_data_for_question with the question first" in system
    for first, second in ((0, 1), (3, 4)):
        assert found not in offered[first] and found in offered[second], offered
    for i in (1, 2):
        t = Trace.model_validate_json((out / "traces" / f"c{i}.json").read_text())
        assert [c.name for c in t.tool_calls] == ["find_data_for_question", found]
        called = t.tool_calls[1]
        assert not called.is_error and called.tool_version == "1.0.0"
        assert found in [x["name"] for x in t.tools]
