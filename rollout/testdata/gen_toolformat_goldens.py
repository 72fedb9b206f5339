#!/usr/bin/env python3
"""gen_toolformat_goldens.py: golden renderings of Qwen3-Coder's chat
template (qwen3coder_chat_template.jinja) for conversations that end in
tool results, made with Python's jinja2 set up as transformers'
apply_chat_template sets it up (ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks and loopcontrols; tojson as json.dumps with
ensure_ascii=False; raise_exception).

Run from this folder: python3 gen_toolformat_goldens.py
It writes qwen3coder_goldens.json: a list of {"name", "messages", "tools",
"expected"}, expected rendered with add_generation_prompt=True.
"""
import json

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
template = env.from_string(open("qwen3coder_chat_template.jinja", encoding="utf-8").read())

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather forecast for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "days": {"type": "integer"},
        "units": {"type": "object"},
        "hourly": {"type": "boolean"},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    }, "required": ["city"]}}}
RUN = {"type": "function", "function": {
    "name": "run_python", "description": "Run Python code.",
    "parameters": {"type": "object", "properties": {
        "code": {"type": "string"}, "timeout": {"type": "number"}}, "required": ["code"]}}}


def call(name, args):
    return {"type": "function", "function": {"name": name, "arguments": args}}


CASES = [
    ("one_call", [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Weather in Paris for 3 days?"},
        {"role": "assistant", "content": "", "tool_calls": [call("get_weather", {
            "city": "Paris", "days": 3, "units": {"temp": "C", "wind": ["km/h"]}, "hourly": True, "note": None})]},
        {"role": "tool", "content": "{\"temp\": [21, 19, 23], \"sky\": \"clear\"}"},
    ], [WEATHER]),
    ("two_calls_with_content", [
        {"role": "user", "content": "Compare Oslo and Rome, then compute 2**10."},
        {"role": "assistant", "content": "Let me look both up.", "tool_calls": [
            call("get_weather", {"city": "Oslo"}), call("get_weather", {"city": "Rome", "hourly": False})]},
        {"role": "tool", "content": "Oslo: 4C, rain"},
        {"role": "tool", "content": "Rome: 18C\nsunny"},
    ], [WEATHER, RUN]),
    ("later_turn", [
        {"role": "user", "content": "What is 2**10?"},
        {"role": "assistant", "content": "", "tool_calls": [call("run_python", {"code": "print(2**10)", "timeout": 2.5})]},
        {"role": "tool", "content": "1024"},
        {"role": "assistant", "content": "2**10 = 1024."},
        {"role": "user", "content": "And 3**5 in a script\nthat prints <b>tags</b>?"},
        {"role": "assistant", "content": "", "tool_calls": [call("run_python", {
            "code": "x = 3**5\nprint(f\"<b>{x}</b>\")\n", "timeout": 10})]},
        {"role": "tool", "content": "<b>243</b>\n"},
    ], [WEATHER, RUN]),
]

out = []
for name, messages, tools in CASES:
    expected = template.render(messages=messages, tools=tools, add_generation_prompt=True)
    out.append({"name": name, "messages": messages, "tools": tools, "expected": expected})

with open("qwen3coder_goldens.json", "w", encoding="utf-8") as f:
    json.dump(out, f, ensure_ascii=False, indent=1)
    f.write("\n")
