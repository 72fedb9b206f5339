// hf_pretok.js — golden pre-tokenizations from Hugging Face tokenizers
// (Rust, Oniguruma regexes; tokenizers 0.22 through the npm package
// @anush008/tokenizers) of random Unicode strings built from characters of
// every class the split regexes distinguish, plus edge_texts.jsonl.
//
// Run (npm install in a scratch dir outside the repo):
//   NODE_PATH=$SCRATCH/node_modules node hf_pretok.js > pretok_cases.jsonl
// Output lines: {"file", "text", "pieces"}; pieces are in the byte-level
// alphabet, as preTokenizeString returns them.
const fs = require('fs');
const { Tokenizer } = require('@anush008/tokenizers');

const palette = Array.from("aZsStrevmlLdé你ſK07١Ⅳ²   \t\v\f\u3000\u00a0\u2028\u0085\u2009\r\n\n''.!(😀\u0301\u200b_\uFFFD");
let seed = 12345;
const rand = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
const texts = [];
for (let i = 0; i < 400; i++) {
  let s = '';
  const len = 1 + rand(24);
  for (let k = 0; k < len; k++) s += palette[rand(palette.length)];
  texts.push(s);
}
for (const line of fs.readFileSync('edge_texts.jsonl', 'utf8').split('\n').filter(Boolean)) texts.push(JSON.parse(line).text);

for (const file of ['tokenizer.json', 'tiny_llama3.json', 'tiny_gpt2.json']) {
  const pt = Tokenizer.fromFile(file === 'tokenizer.json' ? '../qwen3/tokenizer.json' : file).getPreTokenizer();
  for (const text of texts) {
    const pieces = pt.preTokenizeString(text).map((p) => p[0]);
    process.stdout.write(JSON.stringify({ file, text, pieces }) + '\n');
  }
}
