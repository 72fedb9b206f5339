// hf_encode.js — golden ids from Hugging Face tokenizers (Rust, via the npm
// package @anush008/tokenizers, which wraps tokenizers 0.22) for the texts
// in a JSONL file of {"text": ...} lines.
//
// Run (from a scratch dir that has `npm install @anush008/tokenizers`):
//   NODE_PATH=$SCRATCH/node_modules node hf_encode.js ../qwen3/tokenizer.json edge_texts.jsonl > edge_cases.jsonl
// Each output line is {"text", "ids", "decoded"}: ids from
// encode(text, add_special_tokens=false), decoded from decode(ids, false).
const fs = require('fs');
const { Tokenizer } = require('@anush008/tokenizers');

async function main() {
  const [tokPath, textsPath] = process.argv.slice(2);
  const tok = Tokenizer.fromFile(tokPath);
  const lines = fs.readFileSync(textsPath, 'utf8').split('\n').filter(Boolean);
  for (const line of lines) {
    const { text } = JSON.parse(line);
    const enc = await tok.encode(text, null, { addSpecialTokens: false });
    const ids = enc.getIds();
    const decoded = await tok.decode(ids, false);
    process.stdout.write(JSON.stringify({ text, ids, decoded }) + '\n');
  }
}
main().catch((e) => { console.error(e); process.exit(1); });
