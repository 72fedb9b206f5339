package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"

	"github.com/agentrl/agentrl/internal/atomicfile"
)

// Tensor is one tensor to write: its values come from Float32, converted
// to DType (F32, BF16 or F16), or from Raw, the little-endian bytes of any
// dtype. Exactly one of them is set unless the tensor has no elements.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	// Float32 holds the values in row-major order.
	Float32 []float32
	// Raw holds the encoded bytes, when Float32 is nil.
	Raw []byte
}

// ErrWrite marks tensors that cannot be written as given.
var ErrWrite = errors.New("safetensors: cannot write")

func (t *Tensor) byteSize() (int64, error) {
	if t.Name == "" {
		return 0, fmt.Errorf("%w: empty tensor name", ErrWrite)
	}
	if t.Name == metadataKey {
		return 0, fmt.Errorf("%w: tensor name %q is reserved", ErrWrite, metadataKey)
	}
	if !t.DType.Valid() {
		return 0, fmt.Errorf("%w: tensor %q: dtype %q", ErrUnsupportedDType, t.Name, t.DType)
	}
	n := int64(1)
	for i, d := range t.Shape {
		if d < 0 {
			return 0, fmt.Errorf("%w: tensor %q: shape[%d] = %d is negative", ErrWrite, t.Name, i, d)
		}
		if d != 0 && n > math.MaxInt64/int64(d) {
			return 0, fmt.Errorf("%w: tensor %q: shape %v overflows", ErrWrite, t.Name, t.Shape)
		}
		n *= int64(d)
	}
	switch {
	case t.Float32 != nil && t.Raw != nil:
		return 0, fmt.Errorf("%w: tensor %q sets both Float32 and Raw", ErrWrite, t.Name)
	case t.Float32 != nil || (t.Raw == nil && n == 0):
		if t.DType != F32 && t.DType != BF16 && t.DType != F16 {
			if n == 0 {
				return 0, nil
			}
			return 0, fmt.Errorf("%w: tensor %q: float32 values convert only to F32, BF16 or F16, not %s", ErrUnsupportedDType, t.Name, t.DType)
		}
		if int64(len(t.Float32)) != n {
			return 0, fmt.Errorf("%w: tensor %q: shape %v has %d elements, Float32 holds %d", ErrWrite, t.Name, t.Shape, n, len(t.Float32))
		}
	default:
		if int64(len(t.Raw)) != n*int64(t.DType.Size()) {
			return 0, fmt.Errorf("%w: tensor %q: shape %v of %s needs %d bytes, Raw holds %d", ErrWrite, t.Name, t.Shape, t.DType, n*int64(t.DType.Size()), len(t.Raw))
		}
	}
	return n * int64(t.DType.Size()), nil
}

// Write writes tensors and optional metadata in the safetensors format.
//
// Like the reference implementation (safetensors/src/tensor.rs, prepare),
// it orders the data by element size, largest first, then by name, so that
// every tensor starts at a multiple of its element size, and pads the
// header with spaces to a multiple of 8 bytes. The output depends only on
// the set of tensors, not on their order in the slice.
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	order, header, err := buildHeader(tensors, metadata)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(header)))
	bw.Write(lenBuf[:])
	bw.Write(header)
	var chunk []byte
	for _, i := range order {
		t := &tensors[i]
		if t.Float32 == nil {
			if _, err := bw.Write(t.Raw); err != nil {
				return err
			}
			continue
		}
		if chunk == nil {
			chunk = make([]byte, chunkBytes)
		}
		es := t.DType.Size()
		for vals := t.Float32; len(vals) > 0; {
			n := min(len(vals), len(chunk)/es)
			encodeFloat32(t.DType, vals[:n], chunk)
			if _, err := bw.Write(chunk[:n*es]); err != nil {
				return err
			}
			vals = vals[n:]
		}
	}
	return bw.Flush()
}

func encodeFloat32(dt DType, src []float32, dst []byte) {
	switch dt {
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], Float32ToBF16(v))
		}
	case F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], Float32ToF16(v))
		}
	}
}

// buildHeader validates the tensors and returns their data order and the
// padded JSON header.
func buildHeader(tensors []Tensor, metadata map[string]string) ([]int, []byte, error) {
	sizes := make([]int64, len(tensors))
	seen := make(map[string]bool, len(tensors))
	for i := range tensors {
		n, err := tensors[i].byteSize()
		if err != nil {
			return nil, nil, err
		}
		if seen[tensors[i].Name] {
			return nil, nil, fmt.Errorf("%w: duplicate tensor name %q", ErrWrite, tensors[i].Name)
		}
		seen[tensors[i].Name] = true
		sizes[i] = n
	}
	order := make([]int, len(tensors))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool {
		ta, tb := &tensors[order[a]], &tensors[order[b]]
		if sa, sb := ta.DType.Size(), tb.DType.Size(); sa != sb {
			return sa > sb
		}
		return ta.Name < tb.Name
	})
	var h bytes.Buffer
	h.WriteByte('{')
	if len(metadata) > 0 {
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		writeJSONString(&h, metadataKey)
		h.WriteString(":{")
		for i, k := range keys {
			if i > 0 {
				h.WriteByte(',')
			}
			writeJSONString(&h, k)
			h.WriteByte(':')
			writeJSONString(&h, metadata[k])
		}
		h.WriteByte('}')
	}
	var off int64
	for j, i := range order {
		if j > 0 || len(metadata) > 0 {
			h.WriteByte(',')
		}
		t := &tensors[i]
		writeJSONString(&h, t.Name)
		h.WriteString(`:{"dtype":`)
		writeJSONString(&h, string(t.DType))
		h.WriteString(`,"shape":[`)
		for k, d := range t.Shape {
			if k > 0 {
				h.WriteByte(',')
			}
			h.WriteString(strconv.Itoa(d))
		}
		h.WriteString(`],"data_offsets":[`)
		h.WriteString(strconv.FormatInt(off, 10))
		h.WriteByte(',')
		off += sizes[i]
		h.WriteString(strconv.FormatInt(off, 10))
		h.WriteString("]}")
	}
	h.WriteByte('}')
	for h.Len()%8 != 0 {
		h.WriteByte(' ')
	}
	if h.Len() > MaxHeaderSize {
		return nil, nil, fmt.Errorf("%w: header of %d bytes exceeds %d", ErrWrite, h.Len(), MaxHeaderSize)
	}
	return order, h.Bytes(), nil
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // a string always encodes
	b.Truncate(b.Len() - 1)
}

// WriteFile writes tensors to path atomically and durably: into a
// temporary file in the same directory, fsynced and renamed over path once
// complete, then the directory fsynced. The file has mode 0644, as
// config.json and the files of HF's save_pretrained, so that an inference
// server running as another user can load a published checkpoint.
func WriteFile(path string, tensors []Tensor, metadata map[string]string) error {
	if _, _, err := buildHeader(tensors, metadata); err != nil {
		return err
	}
	return writeAtomic(path, func(w io.Writer) error { return Write(w, tensors, metadata) })
}

// writeAtomic replaces path with what write writes (internal/atomicfile),
// with the mode WriteFile documents.
func writeAtomic(path string, write func(io.Writer) error) error {
	if err := atomicfile.Write(path, 0o644, write); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}
