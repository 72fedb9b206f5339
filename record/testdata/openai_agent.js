// openai_agent.js runs agents written against OpenAI's official Node
// client (the npm package openai, found through NODE_PATH) against a
// chat completions endpoint, and prints what the client made of each
// answer as one JSON object. Usage: node openai_agent.js BASE_URL
//
//   runTools:        the client's own tool-calling loop (runTools), the
//                    session named by the X-Session-Id header
//   runToolsStream:  the same, streaming, the session in the base URL
//   logprobs:        one call with logprobs, the session in "user"
//   streamLogprobs:  one streamed call with logprobs, collected chunk by
//                    chunk, the session in "user"
//   errors:          refusals as the client reports them
'use strict';
const OpenAI = require('openai');

const base = process.argv[2];

const addTool = {
  type: 'function',
  function: {
    name: 'add',
    description: 'Add two integers.',
    parameters: {
      type: 'object',
      properties: { a: { type: 'integer' }, b: { type: 'integer' } },
      required: ['a', 'b'],
    },
    function: ({ a, b }) => String(a + b),
    parse: JSON.parse,
  },
};

const question = [
  { role: 'system', content: 'You add numbers with the add tool.' },
  { role: 'user', content: 'What is 2 + 3?' },
];

function client(baseURL, headers) {
  return new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, defaultHeaders: headers || {} });
}

async function postReward(session, reward) {
  const r = await fetch(`${base}/v1/sessions/${session}/reward`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ reward, acc: reward > 0 }),
  });
  return r.status;
}

function refusal(e) {
  return { status: e.status, message: e.message, error: e.error };
}

async function main() {
  const out = {};

  const a = client(`${base}/v1`, { 'X-Session-Id': 'node-a' });
  const runner = a.chat.completions.runTools({ model: 'any', messages: question, tools: [addTool], seed: 7 });
  out.runTools = { content: await runner.finalContent(), messages: runner.messages };
  out.runTools.reward = await postReward('node-a', 1);

  const b = client(`${base}/sessions/node-b/v1`);
  const streamer = b.chat.completions.runTools({
    model: 'any', messages: question, tools: [addTool], stream: true,
    stream_options: { include_usage: true },
  });
  let deltas = 0;
  streamer.on('content', () => { deltas++; });
  out.runToolsStream = { content: await streamer.finalContent(), messages: streamer.messages, contentDeltas: deltas };
  const finals = streamer.allChatCompletions();
  out.runToolsStream.usage = finals.map((c) => c.usage || null);
  out.runToolsStream.reward = await postReward('node-b', 0.5);

  const c = client(`${base}/v1`);
  out.logprobs = await c.chat.completions.create({
    model: 'any', user: 'node-c', logprobs: true, max_tokens: 32,
    messages: [{ role: 'user', content: 'Say hello.' }],
  });

  const stream = await c.chat.completions.create({
    model: 'any', user: 'node-d', logprobs: true, stream: true,
    messages: [{ role: 'user', content: 'Say hello.' }],
  });
  const chunks = [];
  for await (const chunk of stream) {
    chunks.push(chunk);
  }
  out.streamLogprobs = chunks;

  out.errors = {};
  const tries = {
    required: () => c.chat.completions.create({ model: 'any', messages: question, tools: [{ type: 'function', function: { name: 'add' } }], tool_choice: 'required' }),
    topLogprobs: () => c.chat.completions.create({ model: 'any', messages: question, logprobs: true, top_logprobs: 21 }),
    noMessages: () => c.chat.completions.create({ model: 'any', messages: [] }),
    ended: () => a.chat.completions.create({ model: 'any', messages: question }),
  };
  for (const [name, f] of Object.entries(tries)) {
    try {
      await f();
      out.errors[name] = null;
    } catch (e) {
      out.errors[name] = refusal(e);
    }
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack || e) + '\n');
  process.exit(1);
});
