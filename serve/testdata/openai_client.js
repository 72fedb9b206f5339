// openai_client.js drives package serve with OpenAI's official Node
// client (the npm package openai) and prints what the client makes of
// each answer, as one JSON object, for TestOpenAINodeClient.
//
// Usage: NODE_PATH=<node_modules with openai> node openai_client.js <base URL> <model>
const { OpenAI } = require('openai')

async function main() {
  const [base, model] = process.argv.slice(2)
  const client = new OpenAI({ baseURL: base + '/v1', apiKey: 'unused', maxRetries: 0 })
  const out = {}
  // What the client reports for a request the server refuses.
  const failure = async (call) => {
    try {
      await call()
      return { ok: true }
    } catch (e) {
      return { status: e.status, message: e.message, error: e.error ?? null }
    }
  }
  out.topLogprobs = await client.completions.create({
    model, prompt: [10, 20, 30], max_tokens: 3, temperature: 0, logprobs: 2,
  })
  out.textPrompt = await client.completions.create({ model, prompt: 'hi', max_tokens: 2, temperature: 0 })
  out.noMaxTokens = await client.completions.create({ model, prompt: [10, 20, 30], temperature: 0 })
  out.models = (await client.models.list()).data.map((m) => m.id)
  out.model = await client.models.retrieve(model)
  out.unknownModel = await failure(() => client.models.retrieve('gpt-4'))
  out.wrongModel = await failure(() => client.completions.create({ model: 'gpt-4', prompt: 'hi', max_tokens: 1 }))
  out.tooManyLogprobs = await failure(() => client.completions.create({ model, prompt: 'hi', max_tokens: 1, logprobs: 21 }))
  out.unknownRoute = await failure(() => client.embeddings.create({ model, input: 'hi' }))
  process.stdout.write(JSON.stringify(out))
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
