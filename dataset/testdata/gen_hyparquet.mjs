// gen_hyparquet.mjs writes the parquet fixtures that come from an independent
// writer (hyparquet-writer, JavaScript), so that the reader is tested on files
// parquet-go did not produce.
//
// How to run (from a scratch directory outside the repository):
//
//	npm install hyparquet-writer@0.17.0 hyparquet@1.31.5
//	node <repo>/dataset/testdata/gen_hyparquet.mjs <repo>/dataset/testdata
//
// Each NAME.parquet is then read back with hyparquet (an independent reader)
// and its rows are written to NAME.rows.json: the tests compare what the Go
// reader decodes with them.
//
// The layouts follow what Hugging Face datasets (pyarrow) writes for verl's
// examples/data_preprocess/gsm8k.py and for Open-AgentRL's LiveCodeBench set:
// prompt is LIST<STRUCT<content, role>> in the 3-level list encoding,
// reward_model and extra_info are structs (gsm8k) or JSON strings (code).
import { parquetWriteFile } from 'hyparquet-writer'
import { parquetReadObjects } from 'hyparquet'
import fs from 'node:fs'
import path from 'node:path'

const out = process.argv[2]
if (!out) {
  console.error('usage: node gen_hyparquet.mjs <output dir>')
  process.exit(2)
}

const str = (name) => ({ name, type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' })
const i64 = (name) => ({ name, type: 'INT64', repetition_type: 'OPTIONAL' })
const bool = (name) => ({ name, type: 'BOOLEAN', repetition_type: 'OPTIONAL' })
const group = (name, n, extra = {}) => ({ name, repetition_type: 'OPTIONAL', num_children: n, ...extra })

// prompt: optional group prompt (LIST) { repeated group list { optional group element { content; role } } }
const promptSchema = [
  group('prompt', 1, { converted_type: 'LIST' }),
  { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
  group('element', 2),
  str('content'),
  str('role'),
]

// --- verl gsm8k layout (multi-turn tool variant: tools_kwargs in extra_info) ---
const questions = [
  ['Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?', '72'],
  ['Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. How much did she earn?', '10'],
  ['Betty is saving money for a new wallet which costs $100. Betty has only half of the money she needs. Her parents decided to give her $15 for that purpose, and her grandparents twice as much as her parents. How much more money does Betty need to buy the wallet?', '5'],
  ['Julie is reading a 120-page book. Yesterday, she was able to read 12 pages and today, she read twice as many pages as yesterday. If she wants to read half of the remaining pages tomorrow, how many pages should she read?', '42'],
  ['James writes a 3-page letter to 2 different friends twice a week. How many pages does he write a year?', '624'],
]
const system = 'You are a math expert. You are given a question and you need to solve it step by step. Reasoning step by step before any tool call. You should use the `calc_gsm8k_reward` tool after step by step solving the question, before generate final answer at least once and refine your answer if necessary. Put your final answer in the format of `#### <answer>`.'
const suffix = ' Let\'s think step by step and output the final answer after "####".'
const gsm = questions.map(([q, a], i) => ({
  data_source: 'openai/gsm8k',
  prompt: [
    { content: system, role: 'system' },
    { content: q + suffix, role: 'user' },
  ],
  ability: 'math',
  reward_model: { ground_truth: a, style: 'rule' },
  extra_info: {
    answer: 'worked solution #### ' + a,
    index: i,
    need_tools_kwargs: true,
    question: q,
    split: 'train',
    tools_kwargs: { calc_gsm8k_reward: { create_kwargs: { ground_truth: a } } },
  },
}))

const gsmSchema = [
  { name: 'schema', num_children: 5 },
  str('data_source'),
  ...promptSchema,
  str('ability'),
  group('reward_model', 2),
  str('ground_truth'),
  str('style'),
  group('extra_info', 6),
  str('answer'),
  i64('index'),
  bool('need_tools_kwargs'),
  str('question'),
  str('split'),
  group('tools_kwargs', 1),
  group('calc_gsm8k_reward', 1),
  group('create_kwargs', 1),
  str('ground_truth'),
]

parquetWriteFile({
  filename: path.join(out, 'verl_gsm8k_hyparquet.parquet'),
  columnData: [
    { name: 'data_source', data: gsm.map((r) => r.data_source) },
    { name: 'prompt', data: gsm.map((r) => r.prompt) },
    { name: 'ability', data: gsm.map((r) => r.ability) },
    { name: 'reward_model', data: gsm.map((r) => r.reward_model) },
    { name: 'extra_info', data: gsm.map((r) => ({ ...r.extra_info, index: BigInt(r.extra_info.index) })) },
  ],
  schema: gsmSchema,
  rowGroupSize: 2, // three row groups: 2 + 2 + 1 rows
  createdBy: 'hyparquet-writer 0.17.0 (agentrl dataset fixture)',
})

// --- Open-AgentRL LiveCodeBench layout: reward_model and extra_info are JSON strings ---
const lcb = [
  {
    problem: 'Given two integers a and b on one line, print their sum.',
    gt: { inputs: ['1 2\n', '10 -3\n'], outputs: ['3\n', '7\n'] },
    extra: { split: 'test', index: 0, question_id: 'abc001_a' },
  },
  {
    problem: 'Implement twoSum(nums, target) returning the indices of the two numbers that add up to target.',
    gt: { inputs: ['[2,7,11,15]\n9', '[3,2,4]\n6'], outputs: ['[0, 1]', '[1, 2]'], fn_name: 'twoSum' },
    extra: { split: 'test', index: 1, question_id: '1' },
  },
]
parquetWriteFile({
  filename: path.join(out, 'openagentrl_lcb_hyparquet.parquet'),
  columnData: [
    { name: 'data_source', data: lcb.map(() => 'LiveCodeBench_v6') },
    { name: 'problem', data: lcb.map((r) => r.problem) },
    { name: 'ability', data: lcb.map(() => 'code') },
    { name: 'reward_model', data: lcb.map((r) => JSON.stringify({ ground_truth: r.gt, style: 'rule' })) },
    { name: 'extra_info', data: lcb.map((r) => JSON.stringify(r.extra)) },
  ],
  schema: [
    { name: 'schema', num_children: 5 },
    str('data_source'),
    str('problem'),
    str('ability'),
    str('reward_model'),
    str('extra_info'),
  ],
  createdBy: 'hyparquet-writer 0.17.0 (agentrl dataset fixture)',
})

// --- math answers as a list of strings (math_verify accepts any of them) ---
const listOf = (name) => [
  { name, repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
  { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
  str('element'),
]
const user = (q) => [{ content: q, role: 'user' }]
parquetWriteFile({
  filename: path.join(out, 'math_list_gt_hyparquet.parquet'),
  columnData: [
    { name: 'data_source', data: ['math_dapo', 'math_dapo', 'math_dapo'] },
    { name: 'prompt', data: [user('What is 1/2 as a decimal?'), user('Integrate sin from 0 to pi.'), user('No answer given.')] },
    { name: 'ability', data: ['MATH', 'MATH', 'MATH'] },
    { name: 'reward_model', data: [
      { ground_truth: ['0.5', '\\frac{1}{2}'], style: 'rule-lighteval/MATH_v2' },
      { ground_truth: ['2'], style: 'rule-lighteval/MATH_v2' },
      { ground_truth: [], style: 'rule-lighteval/MATH_v2' },
    ] },
  ],
  schema: [
    { name: 'schema', num_children: 4 },
    str('data_source'),
    ...promptSchema,
    str('ability'),
    group('reward_model', 2),
    ...listOf('ground_truth'),
    str('style'),
  ],
  createdBy: 'hyparquet-writer 0.17.0 (agentrl dataset fixture)',
})

// --- integer answers (AIME-style sets store the answer as int64) ---
parquetWriteFile({
  filename: path.join(out, 'math_int_gt_hyparquet.parquet'),
  columnData: [
    { name: 'data_source', data: ['AIME2024', 'AIME2024'] },
    { name: 'prompt', data: [user('Find the remainder when 2^100 is divided by 7.'), user('How many positive divisors does 2024 have?')] },
    { name: 'ability', data: ['MATH', 'MATH'] },
    { name: 'reward_model', data: [{ ground_truth: 2n, style: 'rule' }, { ground_truth: 16n, style: 'rule' }] },
    { name: 'agent_name', data: ['tool_agent', 'tool_agent'] },
  ],
  schema: [
    { name: 'schema', num_children: 5 },
    str('data_source'),
    ...promptSchema,
    str('ability'),
    group('reward_model', 2),
    i64('ground_truth'),
    str('style'),
    str('agent_name'),
  ],
  createdBy: 'hyparquet-writer 0.17.0 (agentrl dataset fixture)',
})

// --- code sets in verl's struct layout: tests as a JSON string in
// ground_truth (stdin and call-based), assert-style tests, and tests under
// extra_info.input_output with no ground truth ---
const codeGT = [
  JSON.stringify({ inputs: ['3\n1 2 3\n'], outputs: ['6\n'] }),
  JSON.stringify({ inputs: [[[1, 2, 3]], [[]]], outputs: [6, 0], fn_name: 'total' }),
  JSON.stringify({ import_prefix: 'from typing import *\n', test_code: 'def check(candidate):\n    assert candidate(2) == 4\n', entry_point: 'Solution().double' }),
  null,
]
parquetWriteFile({
  filename: path.join(out, 'code_tests_hyparquet.parquet'),
  columnData: [
    { name: 'data_source', data: ['skywork_code', 'skywork_code', 'leetcode_code', 'taco_code'] },
    { name: 'prompt', data: [user('Sum the numbers.'), user('Write total(nums).'), user('Write double(x).'), user('Echo the input.')] },
    { name: 'ability', data: ['code', 'code', 'code', 'code'] },
    { name: 'reward_model', data: codeGT.map((g) => ({ ground_truth: g, style: 'rule' })) },
    { name: 'extra_info', data: [
      { index: 0n, input_output: null },
      { index: 1n, input_output: null },
      { index: 2n, input_output: null },
      { index: 3n, input_output: JSON.stringify({ inputs: ['hi\n'], outputs: ['hi\n'] }) },
    ] },
  ],
  schema: [
    { name: 'schema', num_children: 5 },
    str('data_source'),
    ...promptSchema,
    str('ability'),
    group('reward_model', 2),
    str('ground_truth'),
    str('style'),
    group('extra_info', 2),
    i64('index'),
    str('input_output'),
  ],
  createdBy: 'hyparquet-writer 0.17.0 (agentrl dataset fixture)',
})

// --- malformed files: a prompt that is a string, and messages without content ---
parquetWriteFile({
  filename: path.join(out, 'bad_prompt_string_hyparquet.parquet'),
  columnData: [
    { name: 'data_source', data: ['openai/gsm8k', 'openai/gsm8k'] },
    { name: 'prompt', data: ['What is 2+2?', 'What is 3+3?'] },
  ],
  schema: [{ name: 'schema', num_children: 2 }, str('data_source'), str('prompt')],
  createdBy: 'hyparquet-writer 0.17.0 (agentrl dataset fixture)',
})
parquetWriteFile({
  filename: path.join(out, 'bad_missing_content_hyparquet.parquet'),
  columnData: [
    { name: 'data_source', data: ['openai/gsm8k', 'openai/gsm8k'] },
    { name: 'prompt', data: [[{ role: 'user' }], [{ role: 'system' }, { role: 'user' }]] },
  ],
  schema: [
    { name: 'schema', num_children: 2 },
    str('data_source'),
    group('prompt', 1, { converted_type: 'LIST' }),
    { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
    group('element', 1),
    str('role'),
  ],
  createdBy: 'hyparquet-writer 0.17.0 (agentrl dataset fixture)',
})

// --- a legacy list (older writers): under a LIST group, a repeated group
// named "array" is itself the element, even with a single field (the
// backward-compatibility rules of parquet-format's LogicalTypes.md).
// hyparquet reads it as a plain list of strings, so no rows.json is written
// for it: the test states the expected rows by hand. ---
parquetWriteFile({
  filename: path.join(out, 'legacy_list_hyparquet.parquet'),
  columnData: [
    { name: 'prompt', data: [user('legacy layout'), user('second')] },
    { name: 'answers', data: [['1', '2'], []] },
  ],
  schema: [
    { name: 'schema', num_children: 2 },
    ...promptSchema,
    { name: 'answers', repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
    { name: 'array', repetition_type: 'REPEATED', num_children: 1 },
    { name: 'str', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'REQUIRED' },
  ],
  createdBy: 'hyparquet-writer 0.17.0 (agentrl dataset fixture)',
})

for (const name of fs.readdirSync(out).filter((f) => f.endsWith('_hyparquet.parquet') && !f.startsWith('legacy_')).sort()) {
  const buf = fs.readFileSync(path.join(out, name))
  const file = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength)
  const rows = await parquetReadObjects({ file })
  const json = JSON.stringify(rows, (k, v) => (typeof v === 'bigint' ? Number(v) : v), 1)
  fs.writeFileSync(path.join(out, name.replace(/\.parquet$/, '.rows.json')), json + '\n')
}
console.log('wrote fixtures to', out)
