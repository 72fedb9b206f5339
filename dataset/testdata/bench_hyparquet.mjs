// bench_hyparquet.mjs: the reference for BenchmarkReadParquet10k — hyparquet
// (JavaScript) reading the same 10,000-row file into row objects.
//
// How to run (from a scratch directory outside the repository):
//
//	npm install hyparquet@1.31.5
//	DATASET_BENCH_FILE=/scratch/bench10k.parquet go test ./dataset -run TestWriteBenchFile
//	node <repo>/dataset/testdata/bench_hyparquet.mjs /scratch/bench10k.parquet 10
import { parquetReadObjects } from 'hyparquet'
import fs from 'node:fs'

const [file, itersArg] = process.argv.slice(2)
const iters = Number(itersArg || 10)
const buf = fs.readFileSync(file)
const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength)

let rows = 0
// Warm-up, then timed runs. The file is read from memory: the Go benchmark
// reads it through the page cache, so neither pays for the disk.
await parquetReadObjects({ file: ab })
const start = process.hrtime.bigint()
for (let i = 0; i < iters; i++) {
  const objs = await parquetReadObjects({ file: ab })
  rows += objs.length
}
const secs = Number(process.hrtime.bigint() - start) / 1e9
console.log(`hyparquet: ${rows} rows in ${secs.toFixed(3)} s: ${Math.round(rows / secs)} rows/s (${(secs / iters * 1e3).toFixed(1)} ms/op)`)
