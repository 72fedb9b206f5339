// Package safetensors reads and writes the safetensors checkpoint format of
// Hugging Face (https://github.com/huggingface/safetensors), and sharded
// checkpoints described by a model.safetensors.index.json.
//
// A safetensors file is an 8-byte little-endian unsigned header length N,
// then N bytes of a UTF-8 JSON object mapping each tensor name to its
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the
// byte after the header) plus an optional "__metadata__" object of string
// values, then the tensor data, little-endian and row-major.
//
// The reader validates a header as strictly as the reference Rust
// implementation and more: the header is at most MaxHeaderSize bytes of
// well-formed JSON starting with '{', names are unique, every dtype is
// known, shapes are non-negative and their products do not overflow, each
// tensor's byte length equals its element count times its dtype size, and
// the tensors tile the data section exactly (no gap, no overlap, nothing
// past or short of the end of the file). Tensor data is read on demand
// through an io.ReaderAt, so opening a multi-gigabyte checkpoint reads only
// its header.
//
// F32, F16 and BF16 tensors convert to float32 exactly (subnormals,
// infinities and NaN included); other dtypes are available as raw bytes.
// The writer writes F32, BF16 (rounded to nearest even, as torch does) and
// F16, or any dtype from raw little-endian bytes. A tensor's values may
// also be supplied only when it is written (Tensor.Fill): the layout of
// the files is computed from names, dtypes and shapes first, then the
// data streams one tensor at a time, so that writing a checkpoint (in
// shards or not) holds its largest tensor, not the model.
//
// Apart from internal/atomicfile, which replaces files atomically for the
// whole module, safetensors depends on nothing else in agentrl.
package safetensors
