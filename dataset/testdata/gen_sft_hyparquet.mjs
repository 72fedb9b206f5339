// gen_sft_hyparquet.mjs writes sft_openagentrl_hyparquet.parquet: four of the
// conversations of sft_conversations.jsonl in the layout of verl's multi-turn
// SFT parquet files and Open-AgentRL's SFT set (Gen-Verse/Open-AgentRL-SFT-3K,
// read by verl with data.multiturn.messages_key=messages and tools_key=tools),
// written by an independent writer (hyparquet-writer, JavaScript):
//
//   messages: LIST<STRUCT<role, content, reasoning_content,
//             tool_calls: LIST<STRUCT<type, function: STRUCT<name, arguments: STRUCT<code>>>>>>
//   tools:    a JSON string (null when the conversation has none)
//   name:     the fixture's name
//
// Tool-call arguments are structs, as pyarrow writes dicts; every message
// has every field, null where the message had none. The file is read back
// with hyparquet (an independent reader) into
// sft_openagentrl_hyparquet.rows.json, which TestParquetMatchesIndependentReader
// compares with the Go reader's rows.
//
// How to run (from a scratch directory outside the repository):
//
//	npm install hyparquet-writer@0.17.0 hyparquet@1.31.5
//	cp <repo>/dataset/testdata/gen_sft_hyparquet.mjs . && node gen_sft_hyparquet.mjs <repo>/dataset/testdata
import { parquetWriteFile } from 'hyparquet-writer'
import { parquetReadObjects } from 'hyparquet'
import fs from 'node:fs'
import path from 'node:path'

const out = process.argv[2]
if (!out) {
  console.error('usage: node gen_sft_hyparquet.mjs <output dir>')
  process.exit(2)
}
const keep = ['tool_thinking', 'multi_query_reasoning_dropped', 'empty_reasoning_tool_turn', 'plain_chat_last_turn']
const rows = fs.readFileSync(path.join(out, 'sft_conversations.jsonl'), 'utf8')
  .split('\n').filter(Boolean).map((l) => JSON.parse(l)).filter((r) => keep.includes(r.name))

const str = (name) => ({ name, type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' })
const group = (name, n, extra = {}) => ({ name, repetition_type: 'OPTIONAL', num_children: n, ...extra })
const list = () => ({ name: 'list', repetition_type: 'REPEATED', num_children: 1 })

const messages = rows.map((r) => r.messages.map((m) => ({
  role: m.role,
  content: m.content ?? null,
  reasoning_content: m.reasoning_content ?? null,
  tool_calls: m.tool_calls
    ? m.tool_calls.map((c) => ({ type: c.type, function: { name: c.function.name, arguments: { code: c.function.arguments.code } } }))
    : null,
})))
const tools = rows.map((r) => (r.tools == null ? null : typeof r.tools === 'string' ? r.tools : JSON.stringify(r.tools)))

parquetWriteFile({
  filename: path.join(out, 'sft_openagentrl_hyparquet.parquet'),
  columnData: [
    { name: 'messages', data: messages },
    { name: 'tools', data: tools },
    { name: 'name', data: rows.map((r) => r.name) },
  ],
  schema: [
    { name: 'schema', num_children: 3 },
    group('messages', 1, { converted_type: 'LIST' }),
    list(),
    group('element', 4),
    str('role'),
    str('content'),
    str('reasoning_content'),
    group('tool_calls', 1, { converted_type: 'LIST' }),
    list(),
    group('element', 2),
    str('type'),
    group('function', 2),
    str('name'),
    group('arguments', 1),
    str('code'),
    str('tools'),
    str('name'),
  ],
  createdBy: 'hyparquet-writer 0.17.0 (agentrl dataset fixture)',
})

{
  const file = fs.readFileSync(path.join(out, 'sft_openagentrl_hyparquet.parquet'))
  const ab = file.buffer.slice(file.byteOffset, file.byteOffset + file.byteLength)
  const rows = await parquetReadObjects({ file: ab })
  // hyparquet gives a null LIST field as undefined, which JSON leaves out;
  // pyarrow, and the Go reader, give it as null.
  for (const r of rows) for (const m of r.messages) if (m.tool_calls === undefined) m.tool_calls = null
  fs.writeFileSync(path.join(out, 'sft_openagentrl_hyparquet.rows.json'), JSON.stringify(rows, null, 1) + '\n')
}
