// hf_random.js — golden ids from Hugging Face tokenizers (Rust, tokenizers
// 0.22 through the npm package @anush008/tokenizers) for 500 random strings
// mixing special tokens, characters NFC composes (e + U+0301, Hangul jamo,
// A + ring), CJK, emoji, digits, contractions and white space of every kind.
//
// Run (npm install in a scratch dir outside the repo):
//   NODE_PATH=$SCRATCH/node_modules node hf_random.js ../qwen3/tokenizer.json > random_cases.jsonl
// Output lines: {"text", "ids"} from encode(text, add_special_tokens=false).
const { Tokenizer } = require('@anush008/tokenizers');

const parts = [
  'the', ' the', 'The', ' quick', 'brown', "'s", "'RE", "n't", ' I', 'ſ', '12', '3456', ' 7', '١٢', '²',
  ' ', '  ', '\t', '\n', '\r\n', '\n\n', ' \n ', '\u3000', '\u00a0', '\u2028', '\u0085',
  '.', ',', '!!', '...', '(', ')', '{', '}', '=>', '::', '#', '$$', '\\frac', '<', '>', '</', '|',
  'e\u0301', '\u0301', 'A\u030A', '\u1100', '\u1161', '\u11A8', '\u00e9', 'ﬁ', 'Å',
  '你好', '世界', '。', 'こんにちは', '안녕', 'हिन्दी', 'ไทย', 'عربى', '😀', '👍🏽', '👨‍👩‍👧', '🇫🇷',
  '<|im_start|>', '<|im_end|>', '<|endoftext|>', '<think>', '</think>', '<tool_call>', '</tool_call>',
  '<tool_response>', '<|im_start', 'im_end|>', '<think', '\u200b', '\uFFFD', '_', '__init__',
];
let seed = 987654;
const rand = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return Math.floor(seed / 65536) % n; };

async function main() {
  const tok = Tokenizer.fromFile(process.argv[2]);
  for (let i = 0; i < 500; i++) {
    let text = '';
    const len = 1 + rand(30);
    for (let k = 0; k < len; k++) text += parts[rand(parts.length)];
    const enc = await tok.encode(text, null, { addSpecialTokens: false });
    process.stdout.write(JSON.stringify({ text, ids: enc.getIds() }) + '\n');
  }
}
main().catch((e) => { console.error(e); process.exit(1); });
