package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/written_by_go.safetensors")

func openGolden(t *testing.T) *File {
	t.Helper()
	f, err := Open(filepath.Join("testdata", "golden.safetensors"))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

func bitsOf(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}

// TestGolden reads a file written by testdata/gen_safetensors.py (plain
// struct/json + torch 1.13) and checks every value against a hand-derived
// float32.
func TestGolden(t *testing.T) {
	f := openGolden(t)
	assert.Equal(t, map[string]string{"format": "pt", "source": "gen_safetensors.py"}, f.Metadata())

	var names []string
	for _, ti := range f.Tensors() {
		names = append(names, ti.Name)
	}
	// The generator lays the data out in name order.
	assert.Equal(t, []string{"bf16", "empty", "f16", "f32", "f32_special", "i64", "round_bf16", "round_f16", "round_source", "scalar"}, names)

	info, ok := f.Info("f32")
	require.True(t, ok)
	assert.Equal(t, F32, info.DType)
	assert.Equal(t, []int{2, 3}, info.Shape)
	assert.Equal(t, int64(24), info.Size)

	got, err := f.Float32("f32")
	require.NoError(t, err)
	// 1e-45 rounds to the smallest float32 subnormal, 2^-149 (bits 0x1).
	assert.Equal(t, []uint32{0, 0x80000000, math.Float32bits(1.5), math.Float32bits(-2.25), math.Float32bits(math.MaxFloat32), 1}, bitsOf(got))

	got, err = f.Float32("f32_special")
	require.NoError(t, err)
	assert.True(t, math.IsInf(float64(got[0]), 1))
	assert.True(t, math.IsInf(float64(got[1]), -1))
	assert.True(t, got[2] != got[2])

	// F16 patterns and their values by the binary16 definition:
	// value = (-1)^s × 2^(e-15) × 1.m, subnormal (e=0): (-1)^s × 2^-14 × 0.m.
	got, err = f.Float32("f16")
	require.NoError(t, err)
	wantF16 := []float32{
		0x1p-24,              // 0x0001 smallest subnormal
		1023 * 0x1p-24,       // 0x03FF largest subnormal
		0x1p-14,              // 0x0400 smallest normal
		65504,                // 0x7BFF largest finite: 2^15 × (1 + 1023/1024)
		1,                    // 0x3C00
		-2,                   // 0xC000
		float32(math.Inf(1)), // 0x7C00
		float32(math.Inf(-1)),
		0,                                // 0x7E00 NaN, checked below
		float32(math.Copysign(0, -1)),    // 0x8000
		(1 + float32(0x155)/1024) * 0.25, // 0x3555: e=13 → 2^-2, m=0x155
	}
	for i, w := range wantF16 {
		if i == 8 {
			assert.True(t, got[i] != got[i], "f16[8] is NaN")
			continue
		}
		assert.Equal(t, math.Float32bits(w), math.Float32bits(got[i]), "f16[%d]", i)
	}

	// BF16 patterns: the upper 16 bits of a float32.
	got, err = f.Float32("bf16")
	require.NoError(t, err)
	wantBF16 := []float32{
		1,                      // 0x3F80
		-0.5,                   // 0xBF00
		0x1p-133,               // 0x0001: smallest subnormal, 2^-126 × 2^-7
		127 * 0x1p-133,         // 0x007F: largest subnormal
		0x1p-126,               // 0x0080: smallest normal
		(2 - 0x1p-7) * 0x1p127, // 0x7F7F: largest finite
		float32(math.Inf(1)),   // 0x7F80
		float32(math.Inf(-1)),  // 0xFF80
		0,                      // 0x7FC0 NaN, checked below
		-0.0,                   // 0x8000 (checked by bits)
		(1 + 73.0/128) * 2,     // 0x4049: e=128 → 2^1, m=0x49=73 → 3.140625
	}
	wantBF16[9] = float32(math.Copysign(0, -1))
	for i, w := range wantBF16 {
		if i == 8 {
			assert.True(t, got[i] != got[i], "bf16[8] is NaN")
			continue
		}
		assert.Equal(t, math.Float32bits(w), math.Float32bits(got[i]), "bf16[%d]", i)
	}

	raw, err := f.Raw("i64")
	require.NoError(t, err)
	require.Len(t, raw, 24)
	assert.Equal(t, int64(-1), int64(binary.LittleEndian.Uint64(raw)))
	assert.Equal(t, int64(0), int64(binary.LittleEndian.Uint64(raw[8:])))
	assert.Equal(t, int64(1<<40), int64(binary.LittleEndian.Uint64(raw[16:])))
	_, err = f.Float32("i64")
	assert.ErrorIs(t, err, ErrUnsupportedDType)

	got, err = f.Float32("scalar")
	require.NoError(t, err)
	assert.Equal(t, []float32{7}, got)
	info, _ = f.Info("scalar")
	assert.Empty(t, info.Shape)

	got, err = f.Float32("empty")
	require.NoError(t, err)
	assert.Empty(t, got)

	_, err = f.Float32("nope")
	assert.ErrorIs(t, err, ErrNotFound)
}

// TestRoundingMatchesTorch compares Float32ToBF16 and Float32ToF16 with
// torch's own conversions of the same float32 values (round_source →
// round_bf16, round_f16 in the golden file): normal, subnormal, overflowing
// and exact-tie inputs.
func TestRoundingMatchesTorch(t *testing.T) {
	f := openGolden(t)
	src, err := f.Float32("round_source")
	require.NoError(t, err)
	require.Greater(t, len(src), 2000)
	rb, err := f.Raw("round_bf16")
	require.NoError(t, err)
	rh, err := f.Raw("round_f16")
	require.NoError(t, err)
	for i, v := range src {
		wantB := binary.LittleEndian.Uint16(rb[2*i:])
		wantH := binary.LittleEndian.Uint16(rh[2*i:])
		require.Equal(t, wantB, Float32ToBF16(v), "bf16 of %g (bits %#08x) at %d", v, math.Float32bits(v), i)
		require.Equal(t, wantH, Float32ToF16(v), "f16 of %g (bits %#08x) at %d", v, math.Float32bits(v), i)
	}
}

// TestF16AllPatterns checks F16ToFloat32 on all 65536 patterns against the
// binary16 definition evaluated with math.Ldexp, and that Float32ToF16
// inverts it exactly (NaN stays NaN).
func TestF16AllPatterns(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		s, e, m := h>>15, (h>>10)&0x1F, h&0x3FF
		var want float64
		switch {
		case e == 0x1F && m != 0:
			want = math.NaN()
		case e == 0x1F:
			want = math.Inf(1)
		case e == 0:
			want = math.Ldexp(float64(m), -24)
		default:
			want = math.Ldexp(1+float64(m)/1024, e-15)
		}
		if s == 1 {
			want = -want
			if want == 0 {
				want = math.Copysign(0, -1)
			}
		}
		got := F16ToFloat32(uint16(h))
		if math.IsNaN(want) {
			require.True(t, got != got, "%#04x", h)
			back := Float32ToF16(got)
			require.Equal(t, uint16(0x7C00), back&0x7C00, "%#04x stays NaN", h)
			require.NotZero(t, back&0x3FF, "%#04x stays NaN", h)
			continue
		}
		require.Equal(t, math.Float64bits(want), math.Float64bits(float64(got)), "%#04x", h)
		require.Equal(t, uint16(h), Float32ToF16(got), "round trip %#04x", h)
	}
}

func TestBF16RoundingByHand(t *testing.T) {
	// 1 + 2^-8 is exactly halfway between bf16 1 (0x3F80) and 1+2^-7
	// (0x3F81): ties go to the even pattern 0x3F80. 1 + 3·2^-8 is halfway
	// between 0x3F81 and 0x3F82 and goes to 0x3F82.
	cases := []struct {
		in   float32
		want uint16
	}{
		{1, 0x3F80},
		{1 + 0x1p-8, 0x3F80},
		{1 + 3*0x1p-8, 0x3F82},
		{1 + 0x1p-8 + 0x1p-20, 0x3F81}, // just above the tie
		{math.MaxFloat32, 0x7F80},      // rounds up to infinity
		{float32(math.Inf(-1)), 0xFF80},
		{float32(math.NaN()), 0x7FC0},
		{-0x1p-140, 0x8000}, // below half the smallest subnormal: -0
	}
	for _, c := range cases {
		assert.Equal(t, c.want, Float32ToBF16(c.in), "%g", c.in)
	}
	for b := 0; b < 1<<16; b++ {
		v := BF16ToFloat32(uint16(b))
		if v == v {
			require.Equal(t, uint16(b), Float32ToBF16(v), "bf16 round trip %#04x", b)
		}
	}
}

func sampleTensors() []Tensor {
	big := make([]float32, chunkBytes/4*2+3) // crosses read-chunk boundaries
	for i := range big {
		big[i] = float32(i%1000) * 0.001
	}
	i32 := make([]byte, 8)
	binary.LittleEndian.PutUint32(i32, 0xFFFFFFFF)
	binary.LittleEndian.PutUint32(i32[4:], 42)
	return []Tensor{
		{Name: "w.f32", DType: F32, Shape: []int{2, 2}, Float32: []float32{1, -2, 0.1, float32(math.Inf(1))}},
		{Name: "w.bf16", DType: BF16, Shape: []int{3}, Float32: []float32{1 + 0x1p-8, 3.14159, -1e-40}},
		{Name: "w.f16", DType: F16, Shape: []int{3}, Float32: []float32{65519, 65520, 0x1p-25 * 3}},
		{Name: "big", DType: BF16, Shape: []int{len(big)}, Float32: big},
		{Name: "ids", DType: I32, Shape: []int{2}, Raw: i32},
		{Name: "scalar", DType: F32, Shape: nil, Float32: []float32{5}},
		{Name: "none", DType: F32, Shape: []int{3, 0}},
	}
}

func TestRoundTrip(t *testing.T) {
	ts := sampleTensors()
	meta := map[string]string{"format": "pt", "note": "ünïcode \"quoted\" <tag>"}
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, ts, meta))
	data := buf.Bytes()
	hlen := binary.LittleEndian.Uint64(data)
	assert.Zero(t, hlen%8, "header padded to 8 bytes")

	f, err := NewReader(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	assert.Equal(t, meta, f.Metadata())
	for _, want := range ts {
		info, ok := f.Info(want.Name)
		require.True(t, ok, want.Name)
		assert.Equal(t, want.DType, info.DType)
		if len(want.Shape) == 0 {
			assert.Empty(t, info.Shape)
		} else {
			assert.Equal(t, want.Shape, info.Shape)
		}
		assert.Zero(t, info.Offset%int64(want.DType.Size()), "%s aligned", want.Name)
		if want.Raw != nil {
			raw, err := f.Raw(want.Name)
			require.NoError(t, err)
			assert.Equal(t, want.Raw, raw)
			continue
		}
		got := make([]float32, info.NumElements())
		require.NoError(t, f.ReadFloat32(want.Name, got))
		for i, v := range want.Float32 {
			var w float32
			switch want.DType {
			case F32:
				w = v
			case BF16:
				w = BF16ToFloat32(Float32ToBF16(v))
			case F16:
				w = F16ToFloat32(Float32ToF16(v))
			}
			require.Equal(t, math.Float32bits(w), math.Float32bits(got[i]), "%s[%d]", want.Name, i)
		}
	}
	// Hand-checked conversions of the small tensors.
	bf, _ := f.Float32("w.bf16")
	assert.Equal(t, float32(1), bf[0])        // tie to even
	assert.Equal(t, float32(3.140625), bf[1]) // 0x4049
	// -1e-40 is the float32 subnormal -71362 × 2^-149, bits 0x800116C2;
	// bf16 keeps the upper half 0x8001 (the lower half 0x16C2 < 0x8000
	// rounds down): -2^-133.
	assert.Equal(t, float32(-0x1p-133), bf[2])
	hf, _ := f.Float32("w.f16")
	assert.Equal(t, float32(65504), hf[0])        // below the midpoint 65520
	assert.True(t, math.IsInf(float64(hf[1]), 1)) // the midpoint ties to even: infinity
	assert.Equal(t, float32(0x1p-24*2), hf[2])    // 1.5 × 2^-24 ties to even 2 × 2^-24
	err = f.ReadFloat32("w.f32", make([]float32, 3))
	assert.ErrorContains(t, err, `tensor "w.f32" has 4 elements, destination holds 3`)

	// The output depends on the set of tensors, not their order.
	rev := append([]Tensor(nil), ts...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	var buf2 bytes.Buffer
	require.NoError(t, Write(&buf2, rev, meta))
	assert.Equal(t, data, buf2.Bytes())
}

// writtenByGoTensors is the content of testdata/written_by_go.safetensors,
// whose parse by the Python generator's independent reader is committed as
// testdata/written_by_go.python.json.
func writtenByGoTensors() []Tensor {
	i64 := make([]byte, 16)
	binary.LittleEndian.PutUint64(i64, uint64(1<<40))
	binary.LittleEndian.PutUint64(i64[8:], uint64(0xFFFFFFFFFFFFFFFF))
	return []Tensor{
		{Name: "model.embed_tokens.weight", DType: BF16, Shape: []int{2, 3}, Float32: []float32{1, -0.5, 3.14159, 1 + 0x1p-8, 1e-40, float32(math.Inf(-1))}},
		{Name: "model.norm.weight", DType: F32, Shape: []int{3}, Float32: []float32{0.1, -0, 1e-45}},
		{Name: "half", DType: F16, Shape: []int{2}, Float32: []float32{65519, 0x1p-24}},
		{Name: "ids", DType: I64, Shape: []int{2}, Raw: i64},
		{Name: "scalar", DType: F32, Float32: []float32{2.5}},
	}
}

func TestWrittenByGo(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, writtenByGoTensors(), map[string]string{"format": "pt"}))
	path := filepath.Join("testdata", "written_by_go.safetensors")
	if *update {
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	}
	committed, err := os.ReadFile(path)
	require.NoError(t, err)
	// The committed file, which Python read, is what Write produces today.
	require.Equal(t, committed, buf.Bytes())

	data, err := os.ReadFile(filepath.Join("testdata", "written_by_go.python.json"))
	require.NoError(t, err)
	var py struct {
		Metadata map[string]string `json:"metadata"`
		Tensors  map[string]struct {
			DType  string            `json:"dtype"`
			Shape  []int             `json:"shape"`
			Values []json.RawMessage `json:"float32_bits_or_values"`
		} `json:"tensors"`
	}
	require.NoError(t, json.Unmarshal(data, &py))
	assert.Equal(t, map[string]string{"format": "pt"}, py.Metadata)
	require.Len(t, py.Tensors, 5)
	for _, want := range writtenByGoTensors() {
		got, ok := py.Tensors[want.Name]
		require.True(t, ok, want.Name)
		assert.Equal(t, string(want.DType), got.DType, want.Name)
		if want.Shape == nil {
			assert.Empty(t, got.Shape)
		} else {
			assert.Equal(t, want.Shape, got.Shape, want.Name)
		}
		if want.Raw != nil {
			// Python unpacked I64 with struct "<q".
			assert.Equal(t, "1099511627776", string(got.Values[0]))
			assert.Equal(t, "-1", string(got.Values[1]))
			continue
		}
		require.Len(t, got.Values, len(want.Float32), want.Name)
		for i, v := range want.Float32 {
			var w float32
			switch want.DType {
			case F32:
				w = v
			case BF16:
				w = BF16ToFloat32(Float32ToBF16(v))
			case F16:
				w = F16ToFloat32(Float32ToF16(v))
			}
			var bits uint32
			require.NoError(t, json.Unmarshal(got.Values[i], &bits))
			assert.Equal(t, math.Float32bits(w), bits, "%s[%d]", want.Name, i)
		}
	}
}

// header builds a file from a raw header string and n data bytes.
func header(h string, n int) []byte {
	out := make([]byte, 8, 8+len(h)+n)
	binary.LittleEndian.PutUint64(out, uint64(len(h)))
	out = append(out, h...)
	return append(out, make([]byte, n)...)
}

func TestInvalid(t *testing.T) {
	hugeLen := make([]byte, 16)
	binary.LittleEndian.PutUint64(hugeLen, MaxHeaderSize+1)
	pastEnd := make([]byte, 16)
	binary.LittleEndian.PutUint64(pastEnd, 9)
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "shorter than the 8-byte header length"},
		{"header too large", hugeLen, "exceeds the limit"},
		{"header past end", pastEnd, "exceeds the 8 bytes after the length field"},
		{"not an object", header(`[1]`, 0), "does not start with '{'"},
		{"bad utf8", header("{\"\xff\":1}", 0), "not valid UTF-8"},
		{"malformed json", header(`{"a":`, 0), "header"},
		{"trailing data", header(`{} {}`, 0), "data after the JSON object"},
		{"duplicate tensor", header(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 2), `duplicate key "a"`},
		{"duplicate field", header(`{"a":{"dtype":"U8","dtype":"F32","shape":[1],"data_offsets":[0,1]}}`, 1), `duplicate key "dtype"`},
		{"unknown field", header(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}}`, 1), `unknown field "x"`},
		{"missing dtype", header(`{"a":{"shape":[1],"data_offsets":[0,1]}}`, 1), `missing field "dtype"`},
		{"missing shape", header(`{"a":{"dtype":"U8","data_offsets":[0,1]}}`, 1), `missing field "shape"`},
		{"missing offsets", header(`{"a":{"dtype":"U8","shape":[1]}}`, 1), `missing field "data_offsets"`},
		{"unknown dtype", header(`{"a":{"dtype":"F7","shape":[1],"data_offsets":[0,1]}}`, 1), `unsupported dtype: "F7"`},
		{"sub-byte dtype", header(`{"a":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}}`, 1), `sub-byte`},
		{"negative dim", header(`{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}`, 1), `shape[0] = -1 is negative`},
		{"fractional dim", header(`{"a":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}}`, 1), `tensor "a"`},
		{"overflowing shape", header(`{"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,1]}}`, 1), `element count overflows`},
		{"overflowing bytes", header(`{"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,1]}}`, 1), `byte length overflows`},
		{"three offsets", header(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}}`, 1), `data_offsets has 3 values`},
		{"reversed offsets", header(`{"a":{"dtype":"U8","shape":[0],"data_offsets":[1,0]}}`, 1), `not an ordered pair`},
		{"size mismatch", header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 4), `span 4 bytes, but shape [2] of F32 needs 8`},
		{"gap", header(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 2), `leave a gap after byte 0`},
		{"overlap", header(`{"a":{"dtype":"U16","shape":[1],"data_offsets":[0,2]},"b":{"dtype":"U16","shape":[1],"data_offsets":[1,3]}}`, 3), `overlap the previous tensor`},
		{"short data", header(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, 3), `cover 4 data bytes but the file holds 3`},
		{"extra data", header(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, 5), `cover 4 data bytes but the file holds 5`},
		{"metadata not string", header(`{"__metadata__":{"k":1}}`, 0), `value of "k" is not a string`},
		{"metadata not object", header(`{"__metadata__":"x"}`, 0), `not a JSON object`},
		{"empty name", header(`{"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 1), `empty tensor name`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(c.data), int64(len(c.data)))
			require.Error(t, err)
			assert.ErrorContains(t, err, c.want)
			if c.name == "unknown dtype" || c.name == "sub-byte dtype" {
				assert.ErrorIs(t, err, ErrUnsupportedDType)
			} else {
				assert.ErrorIs(t, err, ErrInvalid)
			}
		})
	}
}

func TestValidEdgeCases(t *testing.T) {
	// An empty header, spaces after the object, zero-size tensors sharing an
	// offset with a neighbour: all valid per the reference implementation.
	for _, data := range [][]byte{
		header(`{}`, 0),
		header(`{}      `, 0),
		header(`{"__metadata__":null}`, 0),
		header(`{"z":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"e":{"dtype":"I64","shape":[3,0],"data_offsets":[2,2]}}`, 2),
	} {
		f, err := NewReader(bytes.NewReader(data), int64(len(data)))
		require.NoError(t, err, string(data[8:]))
		for _, ti := range f.Tensors() {
			_, err := f.Raw(ti.Name)
			require.NoError(t, err)
		}
	}
}

func TestWriteErrors(t *testing.T) {
	cases := []struct {
		name string
		ts   []Tensor
		want string
	}{
		{"empty name", []Tensor{{DType: F32, Shape: []int{1}, Float32: []float32{1}}}, "empty tensor name"},
		{"reserved", []Tensor{{Name: "__metadata__", DType: F32, Shape: []int{1}, Float32: []float32{1}}}, "reserved"},
		{"duplicate", []Tensor{{Name: "a", DType: F32, Shape: []int{1}, Float32: []float32{1}}, {Name: "a", DType: F32, Shape: []int{1}, Float32: []float32{1}}}, `duplicate tensor name "a"`},
		{"bad dtype", []Tensor{{Name: "a", DType: "F7", Shape: []int{1}, Float32: []float32{1}}}, `dtype "F7"`},
		{"float to int", []Tensor{{Name: "a", DType: I64, Shape: []int{1}, Float32: []float32{1}}}, "convert only to F32, BF16 or F16"},
		{"count mismatch", []Tensor{{Name: "a", DType: F32, Shape: []int{2, 2}, Float32: []float32{1}}}, "has 4 elements, Float32 holds 1"},
		{"raw mismatch", []Tensor{{Name: "a", DType: I32, Shape: []int{2}, Raw: []byte{1, 2, 3}}}, "needs 8 bytes, Raw holds 3"},
		{"both", []Tensor{{Name: "a", DType: F32, Shape: []int{1}, Float32: []float32{1}, Raw: []byte{1, 2, 3, 4}}}, "both Float32 and Raw"},
		{"negative", []Tensor{{Name: "a", DType: F32, Shape: []int{-1}}}, "shape[0] = -1 is negative"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(&buf, c.ts, nil)
			assert.ErrorContains(t, err, c.want)
			assert.Zero(t, buf.Len(), "nothing written on error")
		})
	}
}

func TestCheckpoint(t *testing.T) {
	ts := sampleTensors()
	t.Run("sharded", func(t *testing.T) {
		dir := t.TempDir()
		// A stale single file from an earlier save is removed.
		require.NoError(t, WriteCheckpoint(dir, ts[:1], nil, 0))
		require.NoError(t, WriteCheckpoint(dir, ts, nil, 1000))
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		// "big" (262147 BF16 values) fills a shard alone; the rest share
		// the next one.
		assert.Equal(t, []string{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors", IndexFileName}, names)
		c, err := OpenCheckpoint(dir)
		require.NoError(t, err)
		defer c.Close()
		assert.Equal(t, []string{"big", "ids", "none", "scalar", "w.bf16", "w.f16", "w.f32"}, c.Names())
		got, err := c.Float32("w.f32")
		require.NoError(t, err)
		assert.Equal(t, ts[0].Float32, got)
		raw, err := c.Raw("ids")
		require.NoError(t, err)
		assert.Equal(t, ts[4].Raw, raw)
		dst := make([]float32, len(ts[3].Float32))
		require.NoError(t, c.ReadFloat32("big", dst))
		assert.Equal(t, BF16ToFloat32(Float32ToBF16(ts[3].Float32[999])), dst[999])
		_, err = c.Float32("missing")
		assert.ErrorIs(t, err, ErrNotFound)

		f, err := os.Open(filepath.Join(dir, IndexFileName))
		require.NoError(t, err)
		idx, err := ReadIndex(f)
		f.Close()
		require.NoError(t, err)
		var total int64
		for _, x := range ts {
			n, _ := x.byteSize()
			total += n
		}
		assert.Equal(t, total, idx.TotalSize)
		assert.Len(t, idx.WeightMap, len(ts))

		// Rewriting as a single file removes the index.
		require.NoError(t, WriteCheckpoint(dir, ts[:1], nil, 0))
		c2, err := OpenCheckpoint(dir)
		require.NoError(t, err)
		assert.Equal(t, []string{"w.f32"}, c2.Names())
		c2.Close()
	})
	t.Run("single", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, WriteCheckpoint(dir, ts, map[string]string{"k": "v"}, 0))
		f, err := Open(filepath.Join(dir, SingleFileName))
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"format": "pt", "k": "v"}, f.Metadata())
		f.Close()
	})
	writeIndex := func(t *testing.T, dir, idx string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, IndexFileName), []byte(idx), 0o644))
	}
	t.Run("index mismatch", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, WriteFile(filepath.Join(dir, "a.safetensors"), ts[:2], nil))
		writeIndex(t, dir, `{"weight_map":{"w.f32":"a.safetensors"}}`)
		_, err := OpenCheckpoint(dir)
		assert.ErrorContains(t, err, `shard a.safetensors holds tensor "w.bf16", which the index does not list`)
		writeIndex(t, dir, `{"weight_map":{"w.f32":"a.safetensors","w.bf16":"a.safetensors","x":"a.safetensors"}}`)
		_, err = OpenCheckpoint(dir)
		assert.ErrorContains(t, err, `tensor "x" is listed for shard a.safetensors but not in it`)
		writeIndex(t, dir, `{"weight_map":{"w.f32":"../a.safetensors"}}`)
		_, err = OpenCheckpoint(dir)
		assert.ErrorContains(t, err, `not a plain file name`)
		writeIndex(t, dir, `{"weight_map":{"w.f32":"a.safetensors","w.f32":"b.safetensors"}}`)
		_, err = OpenCheckpoint(dir)
		assert.ErrorContains(t, err, `duplicate key "w.f32"`)
		writeIndex(t, dir, `{"metadata":{"total_size":-3},"weight_map":{"w.f32":"a.safetensors"}}`)
		_, err = OpenCheckpoint(dir)
		assert.ErrorContains(t, err, `total_size -3`)
		writeIndex(t, dir, `{"weight_map":{}}`)
		_, err = OpenCheckpoint(dir)
		assert.ErrorContains(t, err, `no weight_map entries`)
		writeIndex(t, dir, `{"weight_map":{"w.f32":"missing.safetensors"}}`)
		_, err = OpenCheckpoint(dir)
		assert.ErrorContains(t, err, "missing.safetensors")
	})
	t.Run("no weights", func(t *testing.T) {
		_, err := OpenCheckpoint(t.TempDir())
		assert.ErrorContains(t, err, SingleFileName)
	})
}

// FuzzRead feeds arbitrary bytes to the reader: it must never panic, and a
// file it accepts must have tensors that read back with the sizes the
// header promises.
func FuzzRead(f *testing.F) {
	golden, err := os.ReadFile(filepath.Join("testdata", "golden.safetensors"))
	require.NoError(f, err)
	f.Add(golden)
	var buf bytes.Buffer
	require.NoError(f, Write(&buf, writtenByGoTensors(), map[string]string{"a": "b"}))
	f.Add(buf.Bytes())
	f.Add(header(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, 2))
	f.Add(header(`{"__metadata__":{"k":"v"},"b":{"dtype":"BF16","shape":[1,1],"data_offsets":[0,2]}}`, 2))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "safetensors: ") {
				t.Fatalf("error without package prefix: %v", err)
			}
			return
		}
		var total int64
		for _, ti := range r.Tensors() {
			total += ti.Size
			if int64(ti.NumElements())*int64(ti.DType.Size()) != ti.Size {
				t.Fatalf("tensor %q: %d elements of %s in %d bytes", ti.Name, ti.NumElements(), ti.DType, ti.Size)
			}
			raw, err := r.Raw(ti.Name)
			if err != nil || int64(len(raw)) != ti.Size {
				t.Fatalf("tensor %q: raw read %d bytes, %v", ti.Name, len(raw), err)
			}
			if ti.DType.IsFloat32Convertible() {
				v, err := r.Float32(ti.Name)
				if err != nil || len(v) != ti.NumElements() {
					t.Fatalf("tensor %q: float32 read %d values, %v", ti.Name, len(v), err)
				}
			}
		}
		hlen := binary.LittleEndian.Uint64(data)
		if total != int64(len(data))-8-int64(hlen) {
			t.Fatalf("tensors cover %d bytes of %d", total, int64(len(data))-8-int64(hlen))
		}
	})
}

// FuzzReadIndex: any index JSON parses or fails cleanly, and an accepted
// index names only plain shard files.
func FuzzReadIndex(f *testing.F) {
	f.Add([]byte(`{"metadata":{"total_size":16},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"x.safetensors"}}`))
	f.Add([]byte(`{"metadata":null,"weight_map":{"a":"..\\x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		idx, err := ReadIndex(bytes.NewReader(data))
		if err != nil {
			return
		}
		if len(idx.WeightMap) == 0 || idx.TotalSize < 0 {
			t.Fatalf("accepted %+v", idx)
		}
		for name, shard := range idx.WeightMap {
			if shard == "" || shard == "." || shard == ".." || strings.ContainsAny(shard, `/\`) || filepath.Base(shard) != shard {
				t.Fatalf("tensor %q: shard %q escapes the folder", name, shard)
			}
		}
	})
}

// benchFile writes a 16M-element tensor of dtype dt to a temporary file.
func benchFile(b *testing.B, dt DType) (string, int) {
	const n = 1 << 24
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i%4093) * 0.01
	}
	path := filepath.Join(b.TempDir(), "bench.safetensors")
	require.NoError(b, WriteFile(path, []Tensor{{Name: "w", DType: dt, Shape: []int{n}, Float32: v}}, nil))
	return path, n
}

// BenchmarkReadFloat32 reads a 16M-element tensor from a file (in the page
// cache) into float32. testdata/bench_read.py times the same with torch.
func BenchmarkReadFloat32(b *testing.B) {
	for _, dt := range []DType{F32, BF16} {
		b.Run(string(dt), func(b *testing.B) {
			path, n := benchFile(b, dt)
			f, err := Open(path)
			require.NoError(b, err)
			defer f.Close()
			dst := make([]float32, n)
			b.SetBytes(int64(n * dt.Size()))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := f.ReadFloat32("w", dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWrite writes a 16M-element float32 tensor as BF16 to memory.
func BenchmarkWriteBF16(b *testing.B) {
	const n = 1 << 24
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i%4093) * 0.01
	}
	ts := []Tensor{{Name: "w", DType: BF16, Shape: []int{n}, Float32: v}}
	var buf bytes.Buffer
	buf.Grow(2*n + 1024)
	b.SetBytes(2 * n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf.Reset()
		if err := Write(&buf, ts, nil); err != nil {
			b.Fatal(err)
		}
	}
}
