// hf_decode.js — golden decodes of byte sequences that are not valid UTF-8,
// from Hugging Face tokenizers (Rust, tokenizers 0.22 through the npm package
// @anush008/tokenizers). Each byte becomes its single-byte byte-level token,
// so the decoder's UTF-8 repair is what is checked.
//
// Run (npm install in a scratch dir outside the repo):
//   NODE_PATH=$SCRATCH/node_modules node hf_decode.js ../qwen3/tokenizer.json > decode_cases.jsonl
// Output lines: {"bytes": [...], "ids": [...], "decoded": "..."}.
const { Tokenizer } = require('@anush008/tokenizers');

// GPT-2's bytes_to_unicode.
function byteToChar(b) {
  const bs = [];
  for (let i = 33; i <= 126; i++) bs.push(i);
  for (let i = 161; i <= 172; i++) bs.push(i);
  for (let i = 174; i <= 255; i++) bs.push(i);
  const cs = bs.slice();
  let n = 0;
  for (let i = 0; i < 256; i++) if (!bs.includes(i)) { bs.push(i); cs.push(256 + n); n++; }
  return String.fromCodePoint(cs[bs.indexOf(b)]);
}

const seqs = [
  [0xe4, 0xbd], [0xe4, 0xbd, 0x41], [0xe4, 0xbd, 0xa0], [0xf0, 0x9f, 0x98], [0xf0, 0x9f, 0x98, 0x80],
  [0xc0, 0x80], [0xc1, 0xbf], [0xed, 0xa0, 0x80], [0xed, 0x9f, 0xbf], [0x80], [0x80, 0x80, 0x41],
  [0xf4, 0x90, 0x80, 0x80], [0xf4, 0x8f, 0xbf, 0xbf], [0xe0, 0x80, 0x80], [0xe0, 0xa0], [0xf5, 0x80],
  [0xff, 0xfe, 0x41], [0x41, 0xe4], [0xe4, 0xe4, 0xbd, 0xa0], [0xf0, 0x90, 0x41, 0x80], [0xc2], [0xdf, 0xbf, 0xdf],
];

async function main() {
  const tok = Tokenizer.fromFile(process.argv[2]);
  for (const bytes of seqs) {
    const ids = bytes.map((b) => tok.tokenToId(byteToChar(b)));
    const decoded = await tok.decode(ids, false);
    process.stdout.write(JSON.stringify({ bytes, ids, decoded }) + '\n');
  }
}
main().catch((e) => { console.error(e); process.exit(1); });
