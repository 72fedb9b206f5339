#!/usr/bin/python3
"""gen_sft_golden.py — golden renderings and assistant spans for the SFT
conversations in sft_conversations.jsonl, made independently of the Go code:
the Qwen3 chat template (../../policy/tokenizer/qwen3/tokenizer_config.json)
is rendered with Python's jinja2, set up as transformers' apply_chat_template
sets it up (ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and
the loopcontrols extension; tojson = json.dumps(ensure_ascii=False) keeping
key order; raise_exception).

Spans (the text the model is trained to produce, per assistant message):
  prefix method — start = len(render(messages[:i], add_generation_prompt=True)),
  end = just past the last "<|im_end|>" in render(messages[:i+1]); both
  renderings must be string prefixes of the full rendering;
  otherwise the turn-delimiter method — the generation prompt (what
  add_generation_prompt appends to the full rendering) must occur once per
  assistant message; each span runs from the end of one occurrence to just
  past the first "<|im_end|>" after it.

Run from this folder with Debian's jinja2:
  /usr/bin/python3 gen_sft_golden.py > sft_golden_spans.json
then add token ids and masks with Hugging Face tokenizers (hf_sft_mask.js).
With --bench it times rendering and span finding instead (the reference for
BenchmarkSFTEncode, together with hf_sft_mask.js's BENCH mode).
"""
import json
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

EOT = "<|im_end|>"


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
cfg = json.load(open("../../policy/tokenizer/qwen3/tokenizer_config.json", encoding="utf-8"))
template = env.from_string(cfg["chat_template"])


def render(messages, tools, vars, gen):
    return template.render(messages=messages, tools=tools, add_generation_prompt=gen,
                           eos_token=cfg["eos_token"], **vars)


def message(m):
    """The message as apply_chat_template gets it: content null -> ""."""
    out = {"role": m["role"], "content": m.get("content") or ""}
    if m.get("reasoning_content") is not None:
        out["reasoning_content"] = m["reasoning_content"]
    if m.get("tool_calls"):
        out["tool_calls"] = [{"type": "function", "function": c["function"]} for c in m["tool_calls"]]
    return out


def prefix_spans(msgs, tools, vars, full):
    spans = []
    for i, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        if i == 0:
            return None
        pre = render(msgs[:i], tools, vars, True)
        post = render(msgs[: i + 1], tools, vars, False)
        if not full.startswith(pre) or not full.startswith(post):
            return None
        k = post.rfind(EOT, len(pre))
        end = k + len(EOT) if k >= 0 else len(post)
        spans.append((i, len(pre), end))
    return spans


def turn_spans(msgs, tools, vars, full):
    header = render(msgs, tools, vars, True)[len(full):]
    idx = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
    assert full.count(header) == len(idx), "header count"
    spans, pos = [], 0
    for i in idx:
        start = full.index(header, pos) + len(header)
        end = full.index(EOT, start) + len(EOT)
        spans.append((i, start, end))
        pos = end
    return spans


def golden(row):
    """The rendering and assistant spans of one fixture row."""
    msgs = [message(m) for m in row["messages"]]
    tools = row.get("tools")
    if isinstance(tools, str):
        tools = json.loads(tools)
    vars = row.get("vars", {})
    full = render(msgs, tools, vars, False)
    spans, strategy = prefix_spans(msgs, tools, vars, full), "prefix"
    if spans is None:
        spans, strategy = turn_spans(msgs, tools, vars, full), "turns"
    b = lambda c: len(full[:c].encode("utf-8"))
    return {
        "name": row["name"],
        "text": full,
        "strategy": strategy,
        "spans": [{"message": i, "char_start": s, "char_end": e, "byte_start": b(s), "byte_end": b(e),
                   "text": full[s:e]} for i, s, e in spans],
    }


def rows():
    return [json.loads(line) for line in open("sft_conversations.jsonl", encoding="utf-8")]


if __name__ == "__main__":
    if sys.argv[1:] == ["--bench"]:
        # Rendering and span finding only, conversations per second.
        import time
        rs = rows()
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < 5:
            for r in rs:
                golden(r)
            n += len(rs)
        print(f"{n / (time.perf_counter() - t0):.0f} conversations/s (jinja2 rendering + spans)")
    else:
        json.dump([golden(r) for r in rows()], sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
