// hf_bench.js — times Hugging Face tokenizers (Rust, tokenizers 0.22 through
// the npm package @anush008/tokenizers) on the texts of encode_cases.jsonl,
// for comparison with `go test -bench EncodeCorpus` in the parent package.
//
// Run (npm install in a scratch dir outside the repo):
//   cd $SCRATCH && npm install @anush008/tokenizers
//   NODE_PATH=$SCRATCH/node_modules node hf_bench.js ../qwen3/tokenizer.json encode_cases.jsonl
//
// It reports wall and CPU time (all threads of the process) per pass over
// the corpus; CPU time is the per-core cost and stays meaningful on a busy
// machine. Two ways: (1) encodeBatch on one Rayon thread
// (RAYON_NUM_THREADS=1 is set below, so this is Rust's per-core speed with a
// single N-API call per pass), (2) one encode call per text, awaited in turn,
// which adds Node/N-API overhead per call. It also checks the ids against
// the file's. The last line, RESULT {...}, gives ns per pass for the Go
// benchmark BenchmarkVsHFTokenizers, which runs this script when
// AGENTRL_HF_NODE_MODULES names the node_modules folder.
process.env.RAYON_NUM_THREADS = process.env.RAYON_NUM_THREADS || '1';
const fs = require('fs');
const { Tokenizer } = require('@anush008/tokenizers');

async function main() {
  const [tokPath, casesPath] = process.argv.slice(2);
  const tok = Tokenizer.fromFile(tokPath);
  const cases = fs.readFileSync(casesPath, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const texts = cases.map((c) => c.text);
  const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t), 0);
  const opts = { addSpecialTokens: false };

  const encs = await tok.encodeBatch(texts, opts);
  encs.forEach((e, i) => {
    if (JSON.stringify(e.getIds()) !== JSON.stringify(cases[i].ids)) throw new Error(`case ${i} differs`);
  });

  const result = {};
  const time = async (name, fn) => {
    for (let i = 0; i < 5; i++) await fn(); // warm up (fills the BPE cache)
    let n = 0;
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    let t1 = t0;
    while (t1 - t0 < 3000000000n) {
      await fn();
      n++;
      t1 = process.hrtime.bigint();
    }
    const c = process.cpuUsage(c0);
    const ns = Number(t1 - t0) / n;
    const cpuNs = ((c.user + c.system) * 1e3) / n; // CPU time of all the process's threads
    result[name] = ns;
    result[name + '_cpu'] = cpuNs;
    console.log(`${name}: ${(ns / 1e6).toFixed(3)} ms/pass wall, ${(cpuNs / 1e6).toFixed(3)} ms/pass CPU, ${((bytes / ns) * 1e3).toFixed(2)} MB/s (${n} passes, ${bytes} bytes, RAYON_NUM_THREADS=${process.env.RAYON_NUM_THREADS})`);
  };
  await time('encodeBatch', () => tok.encodeBatch(texts, opts));
  await time('encode per text', async () => {
    for (const t of texts) await tok.encode(t, null, opts);
  });
  console.log('RESULT ' + JSON.stringify(result)); // ns per pass, read by BenchmarkVsHFTokenizers
}
main().catch((e) => { console.error(e); process.exit(1); });
