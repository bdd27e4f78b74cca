#!/usr/bin/env python3
"""Writes tool-renders.json: what the chat templates render for a conversation
with tools, an assistant turn's tool calls and the tool's answer, rendered by
the reference Jinja2 configured as ../shared/data/chat-renders/README.md says
(Hugging Face's apply_chat_template setup). Run from the repository root with
the shared folder beside it: python3 tests/chat/data/make-tool-renders.py"""
import datetime
import json
import pathlib

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

TEMPLATES = ["Qwen-Qwen3-0.6B.jinja", "Qwen3.5-4B.jinja", "Qwen3-Coder.jinja", "Qwen-Qwen2.5-7B-Instruct.jinja",
             "GLM-4.6.jinja", "openai-gpt-oss-120b.jinja"]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}}]
CONVERSATION = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "Let me look.",
     "tool_calls": [{"id": "call-1", "type": "function",
                     "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
    {"role": "tool", "tool_call_id": "call-1", "name": "get_weather", "content": "{\"temp\": 18}"},
]


class GenerationTag(jinja2.ext.Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.Scope(body).set_lineno(lineno)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, GenerationTag])

    def tojson(value, indent=None, separators=None, sort_keys=False, ensure_ascii=False):
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime(2026, 11, 30).strftime(fmt)
    return env


def main():
    root = pathlib.Path(__file__).resolve().parents[3]
    templates = root.parent / "shared" / "data" / "chat-templates"
    env = environment()
    records = []
    for name in TEMPLATES:
        context = {"bos_token": "<|bos|>", "eos_token": "<|eos|>", "messages": CONVERSATION,
                   "add_generation_prompt": True, "tools": TOOLS}
        template = env.from_string((templates / name).read_text())
        records.append({"template": name, "context": context, "expected": template.render(**context)})
    out = pathlib.Path(__file__).with_name("tool-renders.json")
    out.write_text(json.dumps(records, ensure_ascii=False, indent=1) + "\n")


main()
