#!/usr/bin/python3
"""gen_chat_golden.py — golden chat renderings beyond the shared fixture,
made with Python's jinja2 set up as transformers' apply_chat_template sets it
up (transformers/utils/chat_template_utils.py: _compile_jinja_template uses
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[loopcontrols]), a tojson filter calling json.dumps(x,
ensure_ascii=False, indent=indent, separators=separators,
sort_keys=sort_keys), and the raise_exception global; render_jinja_template
passes messages, tools, add_generation_prompt, the special tokens and the
extra keyword arguments).

Run from this folder with Debian's jinja2: /usr/bin/python3 gen_chat_golden.py
It writes chat_golden.json.
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

qwen3 = json.load(open("../qwen3/tokenizer_config.json", encoding="utf-8"))["chat_template"]

# A template that uses what other models' templates use: ordered dict
# iteration with items(), tojson with indent and sort_keys, slicing,
# namespace, loop variables, string methods and filters.
FEATURES = """{%- set ns = namespace(n=0) -%}
{{ bos_token }}
{%- if messages[0].role == 'system' %}[SYS]{{ messages[0].content | trim }}[/SYS]
{% set rest = messages[1:] %}{% else %}{% set rest = messages %}{% endif %}
{%- if tools is not none %}
{%- for tool in tools %}
### {{ tool.function.name | upper }} ({{ loop.index }}/{{ loop.length }})
{% for name, spec in tool.function.parameters.properties.items() %}
- {{ name }}: {{ spec.type }}{% if spec.enum is defined %} one of {{ spec.enum | join(', ') }}{% endif %}
{% endfor %}
{{ tool.function.parameters | tojson(indent=2) }}
{{ tool | tojson(sort_keys=true) }}
{% endfor %}
{%- endif %}
{%- for m in rest %}
{%- set ns.n = ns.n + 1 %}
<{{ m.role }}#{{ ns.n }}{% if loop.last %} last{% endif %}>
{%- if m.tool_calls is defined %}
{%- for c in m.tool_calls %}
CALL {{ c.function.name }} {{ c.function.arguments | tojson }} keys={{ c.function.arguments.keys() | list | join('|') }}
{%- endfor %}
{%- else %}
{{ m.content.replace('\\n', ' / ').strip() }}
{%- endif %}
{%- endfor %}
{% if add_generation_prompt %}<assistant>{% endif %}{{ eos_token }}"""

# Constructs of Llama-3.1-style templates: reassigning messages, bracket
# access, `in` on a dict, is mapping / iterable / string / none tests,
# -}} white-space control, comments, tojson(indent=4), raise_exception in
# a branch not taken, defaults for undefined variables.
FEATURES2 = """{%- if not date_string is defined %}{%- set date_string = "26 Jul 2024" %}{%- endif %}
{%- if not tools is defined %}{%- set tools = none %}{%- endif %}
{#- Pull out the system message. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|sys|>\n" }}
{%- if tools is not none %}{{- "Environment: ipython\n" }}{%- endif %}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|' + message['role'] + '|>\n\n' + message['content'] | trim + '<|eot|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length >= 1 %}{{- raise_exception("no calls") }}{%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|assistant|>\n\n' -}}
        {{- '{"name": "' + tool_call.name + '", "parameters": ' }}
        {%- if tool_call.arguments is string %}{{- tool_call.arguments }}{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}
        {{- "}<|eom|>" }}
    {%- else %}
        {{- "<|ipython|>\n\n" }}
        {%- if message.content is mapping %}{{- message.content | tojson }}{%- else %}{{- message.content }}{%- endif %}
        {{- "<|eot|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|assistant|>\n\n' }}{%- endif %}
"""

# White-space handling of trim_blocks and lstrip_blocks: indented blocks,
# blocks after text or expressions on the same line, comments, the "+" and
# "-" modifiers, a raw block and the dropped final newline.
WHITESPACE = """Start {{ messages|length }} {% if true %}same line{% endif %}
    {% for m in messages %}
    [{{ m.role }}]   {# inline comment #} x
        {# own-line comment #}
  {%+ if true %}plus kept{% endif %}
  {%- if true %} minus{% endif %}
	{% if true -%}
	   trimmed after
	{%- endif %}
{% endfor %}
  {% raw %}  {% not a tag %}  {% endraw %}
text {{ 'a' }}
    {{ 'b' }}   {% if true %}c{% endif %}
end
"""

TOOLS = [
    {"type": "function", "function": {
        "name": "code_interpreter", "description": "Run Python code; returns stdout.",
        "parameters": {"type": "object", "properties": {
            "code": {"type": "string", "description": "Python source. Use print()."},
            "timeout": {"type": "number", "description": "Seconds", "default": 2.5},
            "mode": {"type": "string", "enum": ["exec", "eval"]}},
            "required": ["code"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "search", "description": "Zoek — 検索 \"quoted\" \\ back\tslash",
        "parameters": {"type": "object", "properties": {
            "q": {"type": "string"}, "k": {"type": "integer", "minimum": 1, "maximum": 10}},
            "required": ["q", "k"]}}},
]

AGENT = [
    {"role": "system", "content": "You are DemyAgent. Think, then call tools."},
    {"role": "user", "content": "What is 2^100 mod 97? Also look up Fermat."},
    {"role": "assistant", "content": "", "reasoning_content": "Use the interpreter.\n",
     "tool_calls": [
         {"type": "function", "function": {"name": "code_interpreter",
                                           "arguments": {"code": "print(pow(2, 100, 97))", "timeout": 1.0, "mode": "exec"}}},
         {"type": "function", "function": {"name": "search", "arguments": {"q": "Fermat's little theorem — 費馬", "k": 3}}}]},
    {"role": "tool", "content": "16"},
    {"role": "tool", "content": "{\"results\": [\"a^(p-1) ≡ 1 (mod p)\"]}"},
    {"role": "assistant", "content": "<think>\nIt printed 16.\n</think>\n\nThe answer is \\boxed{16}."},
    {"role": "user", "content": "<tool_response>\nnot really a tool\n</tool_response>"},
    {"role": "user", "content": "And 3^50 mod 7?"},
]

cases = [
    {"name": "qwen3_agent_trajectory", "template": "qwen3", "messages": AGENT, "tools": TOOLS,
     "add_generation_prompt": True, "kwargs": {"enable_thinking": True}},
    {"name": "qwen3_agent_no_prompt", "template": "qwen3", "messages": AGENT[:6], "tools": TOOLS,
     "add_generation_prompt": False, "kwargs": {}},
    {"name": "qwen3_system_only_no_tools", "template": "qwen3", "messages": AGENT[:2], "tools": None,
     "add_generation_prompt": True, "kwargs": {"enable_thinking": False}},
    {"name": "qwen3_last_assistant_thinking", "template": "qwen3",
     "messages": [{"role": "user", "content": "hi"},
                  {"role": "assistant", "content": "\n\n<think>\n\nr\n\n</think>\n\n\nhello"}],
     "tools": None, "add_generation_prompt": False, "kwargs": {}},
    {"name": "features", "template": "features", "messages": AGENT, "tools": TOOLS,
     "add_generation_prompt": True, "kwargs": {}},
    {"name": "features_no_tools", "template": "features", "messages": AGENT[1:3], "tools": None,
     "add_generation_prompt": False, "kwargs": {}},
    {"name": "features2_tools", "template": "features2", "messages": AGENT[:5], "tools": TOOLS,
     "add_generation_prompt": True, "kwargs": {"tools_in_user_message": False}},
    {"name": "whitespace", "template": "whitespace", "messages": AGENT[:2], "tools": None,
     "add_generation_prompt": False, "kwargs": {}},
    {"name": "features2_plain", "template": "features2", "messages": AGENT[1:2], "tools": None,
     "add_generation_prompt": True, "kwargs": {"date_string": "01 Jan 2026"}},
]
special = {"bos_token": "<s>", "eos_token": "</s>"}
for c in cases:
    tpl = env.from_string({"qwen3": qwen3, "features": FEATURES, "features2": FEATURES2, "whitespace": WHITESPACE}[c["template"]])
    extra = {"eos_token": "<|im_end|>"} if c["template"] == "qwen3" else special
    c["expected"] = tpl.render(messages=c["messages"], tools=c["tools"],
                               add_generation_prompt=c["add_generation_prompt"], **extra, **c["kwargs"])
    c["vars"] = extra
json.dump({"features_template": FEATURES, "features2_template": FEATURES2, "whitespace_template": WHITESPACE, "cases": cases}, open("chat_golden.json", "w", encoding="utf-8"),
          ensure_ascii=False, indent=1)
