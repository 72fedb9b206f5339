package dataset

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type typedInner struct {
	A int32   `parquet:"a"`
	B *string `parquet:"b,optional"`
}

// typedRow covers the parquet shapes the assembler converts: integer widths
// and signedness, floats, dates, timestamps, decimals, UUIDs, byte arrays,
// optional values, LIST of LIST, bare repeated fields, MAP, nested groups.
type typedRow struct {
	Prompt    []pgMessage          `parquet:"prompt,list"`
	I8        int8                 `parquet:"i8"`
	I16       int16                `parquet:"i16"`
	U32       uint32               `parquet:"u32"`
	U64       uint64               `parquet:"u64"`
	F32       float32              `parquet:"f32"`
	F64       float64              `parquet:"f64"`
	Flag      bool                 `parquet:"flag"`
	Day       int32                `parquet:"day,date"`
	TsMilli   time.Time            `parquet:"ts_milli,timestamp(millisecond)"`
	TsNano    time.Time            `parquet:"ts_nano,timestamp(nanosecond)"`
	Price     int64                `parquet:"price,decimal(2:10)"`
	ID        [16]byte             `parquet:"id,uuid"`
	Raw       []byte               `parquet:"raw"`
	Maybe     *int64               `parquet:"maybe,optional"`
	Matrix    [][]int32            `parquet:"matrix,list"`
	Tags      []string             `parquet:"tags"`
	Counts    map[string]int32     `parquet:"counts"`
	Inner     typedInner           `parquet:"inner"`
	Inners    []typedInner         `parquet:"inners,list"`
	OptGroup  *typedInner          `parquet:"opt_group,optional"`
	NestedMap map[string][]float64 `parquet:"nested_map"`
}

func TestAssemblerTypes(t *testing.T) {
	s := "bee"
	seven := int64(7)
	rows := []typedRow{{
		Prompt: []pgMessage{{Role: "user", Content: "hi"}},
		I8:     -8, I16: 1600, U32: 4_000_000_000, U64: 1 << 62, F32: 0.5, F64: -2.25, Flag: true,
		Day:       20_000, // days after 1970-01-01: 2024-10-04
		TsMilli:   time.Date(2025, 10, 13, 8, 30, 1, 123_000_000, time.UTC),
		TsNano:    time.Date(1969, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		Price:     12345, // 123.45 at scale 2
		ID:        [16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef},
		Raw:       []byte{'o', 'k'},
		Maybe:     &seven,
		Matrix:    [][]int32{{1, 2}, {}, {3}},
		Tags:      []string{"x", "y"},
		Counts:    map[string]int32{"a": 1, "b": 2},
		Inner:     typedInner{A: 1, B: &s},
		Inners:    []typedInner{{A: 2}, {A: 3, B: &s}},
		NestedMap: map[string][]float64{"k": {1.5, 2.5}},
	}, {
		Prompt: []pgMessage{{Role: "user", Content: "second"}},
		Matrix: nil, Tags: nil, Counts: map[string]int32{}, Inners: nil,
		OptGroup: &typedInner{A: 9},
		TsMilli:  time.Unix(0, 0).UTC(), TsNano: time.Unix(0, 0).UTC(),
	}}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[typedRow](&buf)
	_, err := w.Write(rows)
	require.NoError(t, err)
	require.NoError(t, w.Close())

	pr, err := NewParquetReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "typed.parquet", Options{})
	require.NoError(t, err)
	rec, _, err := pr.nextRecord(context.Background())
	require.NoError(t, err)
	// Expected values worked out by hand from the row above.
	want := map[string]any{
		"prompt": []any{map[string]any{"content": "hi", "role": "user"}},
		"i8":     int64(-8), "i16": int64(1600), "u32": int64(4_000_000_000), "u64": int64(1 << 62),
		"f32": 0.5, "f64": -2.25, "flag": true,
		"day":        "2024-10-04",
		"ts_milli":   "2025-10-13T08:30:01.123Z",
		"ts_nano":    "1969-12-31T23:59:59.999999999Z",
		"price":      123.45,
		"id":         "12345678-9abc-def0-0123-456789abcdef",
		"raw":        "ok",
		"maybe":      int64(7),
		"matrix":     []any{[]any{int64(1), int64(2)}, []any{}, []any{int64(3)}},
		"tags":       []any{"x", "y"},
		"counts":     map[string]any{"a": int64(1), "b": int64(2)},
		"inner":      map[string]any{"a": int64(1), "b": "bee"},
		"inners":     []any{map[string]any{"a": int64(2), "b": nil}, map[string]any{"a": int64(3), "b": "bee"}},
		"opt_group":  nil,
		"nested_map": map[string]any{"k": []any{1.5, 2.5}},
	}
	assert.Equal(t, want, rec)

	rec, _, err = pr.nextRecord(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []any{}, rec["matrix"])
	assert.Equal(t, []any{}, rec["tags"])
	assert.Equal(t, map[string]any{}, rec["counts"])
	assert.Nil(t, rec["maybe"])
	assert.Equal(t, map[string]any{"a": int64(9), "b": nil}, rec["opt_group"])
	assert.Equal(t, "1970-01-01T00:00:00Z", rec["ts_milli"])
}

func TestAssemblerLegacyList(t *testing.T) {
	// testdata/legacy_list_hyparquet.parquet: answers is
	// LIST { repeated group array { required binary str } }; by the
	// backward-compatibility rules the repeated "array" group is the element.
	exs, err := Load(context.Background(), Options{}, "testdata/legacy_list_hyparquet.parquet")
	require.NoError(t, err)
	require.Len(t, exs, 2)
	assert.Equal(t, []any{map[string]any{"str": "1"}, map[string]any{"str": "2"}}, exs[0].Extra["answers"])
	assert.Equal(t, []any{}, exs[1].Extra["answers"])
	assert.Equal(t, "second", exs[1].Prompt[0].Content)
}

// bareRow is the layout of writers that emit a repeated group with no LIST
// annotation (parquetjs, parquet-go without the list tag).
type bareRow struct {
	Prompt []pgMessage `parquet:"prompt"`
}

func TestAssemblerBareRepeatedGroup(t *testing.T) {
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[bareRow](&buf)
	_, err := w.Write([]bareRow{
		{Prompt: []pgMessage{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}}},
		{Prompt: nil},
	})
	require.NoError(t, err)
	require.NoError(t, w.Close())
	pr, err := NewParquetReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "bare.parquet", Options{})
	require.NoError(t, err)
	ex, err := pr.Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []Message{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}}, ex.Prompt)
	_, err = pr.Next(context.Background())
	assert.ErrorContains(t, err, "bare.parquet: row 1: dataset: malformed row: field prompt: empty prompt")
}
