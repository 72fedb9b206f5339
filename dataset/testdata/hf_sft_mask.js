// hf_sft_mask.js — token ids and loss masks for the golden SFT renderings
// (sft_golden_spans.json, from gen_sft_golden.py) with Hugging Face
// tokenizers (Rust, via the npm package @anush008/tokenizers): the text is
// encoded once (add_special_tokens=false) with offsets, and a token is
// masked when its character range overlaps an assistant span — the rule of
// transformers' return_assistant_tokens_mask (a span's first and last
// characters are mapped to their tokens).
//
// Run from this folder, with a scratch dir that has
// `npm install @anush008/tokenizers`:
//   NODE_PATH=$SCRATCH/node_modules node hf_sft_mask.js > sft_golden.json
// With BENCH=1 it times the encoding instead (reference for
// BenchmarkSFTEncode).
const fs = require('fs');
const { Tokenizer } = require('@anush008/tokenizers');

async function main() {
  const tok = Tokenizer.fromFile('../../policy/tokenizer/qwen3/tokenizer.json');
  const cases = JSON.parse(fs.readFileSync('sft_golden_spans.json', 'utf8'));
  if (process.env.BENCH) {
    // Encoding with offsets and masking only, conversations per second.
    let n = 0;
    const t0 = process.hrtime.bigint();
    let secs = 0;
    while (secs < 5) {
      for (const c of cases) {
        const enc = await tok.encode(c.text, null, { addSpecialTokens: false });
        enc.getIds();
        enc.getOffsets();
      }
      n += cases.length;
      secs = Number(process.hrtime.bigint() - t0) / 1e9;
    }
    console.log(`${(n / secs).toFixed(0)} conversations/s (HF tokenizers encode with offsets)`);
    return;
  }
  for (const c of cases) {
    const enc = await tok.encode(c.text, null, { addSpecialTokens: false });
    const ids = enc.getIds();
    const offsets = enc.getOffsets(); // character (code point) offsets
    c.ids = ids;
    c.mask = offsets.map(([a, b]) => (c.spans.some((s) => a < s.char_end && b > s.char_start) ? 1 : 0));
  }
  process.stdout.write(JSON.stringify(cases, null, 1) + '\n');
}
main().catch((e) => { console.error(e); process.exit(1); });
