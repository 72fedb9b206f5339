package dataset

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// The assembler turns one parquet row — leaf values with their repetition
// and definition levels (Dremel encoding; Melnik et al. 2010, and the
// parquet-format spec's LogicalTypes.md for LIST and MAP) — into the generic
// value model directly. parquet-go's Schema.Reconstruct does the same through
// reflection into map[string]any; this is about twice as fast, returns an
// error instead of panicking on inconsistent levels, and converts leaves
// (dates, timestamps, unsigned and decimal integers, UUIDs) once, here.

type asmKind uint8

const (
	asmLeaf asmKind = iota
	asmGroup
	asmList // LIST-annotated group (a bare repeated field is any kind with repeated set)
	asmMap  // MAP-annotated group
)

type asmNode struct {
	name     string
	kind     asmKind
	optional bool // adds a definition level when present
	repeated bool // a bare repeated field: a list of itself
	nLeaves  int
	fields   []*asmNode // group fields; list: [element]; map: [key, value]
	conv     func(parquet.Value) (any, error)
}

var errShortRow = errors.New("row ends before its definition and repetition levels say")

// buildAssembler makes the assembly tree of a file's schema.
func buildAssembler(schema *parquet.Schema) (*asmNode, error) {
	root := &asmNode{name: "", kind: asmGroup}
	for _, f := range schema.Fields() {
		c, err := buildNode(f.Name(), f)
		if err != nil {
			return nil, err
		}
		root.fields = append(root.fields, c)
		root.nLeaves += c.nLeaves
	}
	return root, nil
}

func buildNode(name string, pn parquet.Node) (*asmNode, error) {
	n := &asmNode{name: name, optional: pn.Optional(), repeated: pn.Repeated()}
	if pn.Leaf() {
		conv, err := leafConverter(name, pn.Type())
		if err != nil {
			return nil, err
		}
		n.kind, n.conv, n.nLeaves = asmLeaf, conv, 1
		return n, nil
	}
	fields := pn.Fields()
	switch logicalOf(pn.Type()).(type) {
	case *format.ListType:
		if len(fields) != 1 || !fields[0].Repeated() {
			return nil, fmt.Errorf("%s: LIST group without one repeated field", name)
		}
		rep := fields[0]
		var elem *asmNode
		var err error
		// Backward-compatibility rules of LogicalTypes.md: the repeated
		// field is itself the element when it is a primitive, a group of
		// several fields, or named "array" or "<list>_tuple".
		if rep.Leaf() || len(rep.Fields()) != 1 || rep.Name() == "array" || rep.Name() == name+"_tuple" {
			elem, err = buildNode(name, parquet.Required(rep))
		} else {
			inner := rep.Fields()[0]
			elem, err = buildNode(name, inner)
		}
		if err != nil {
			return nil, err
		}
		if elem.repeated {
			return nil, fmt.Errorf("%s: LIST element is itself repeated", name)
		}
		n.kind, n.fields, n.nLeaves = asmList, []*asmNode{elem}, elem.nLeaves
		return n, nil
	case *format.MapType:
		if len(fields) != 1 || !fields[0].Repeated() || fields[0].Leaf() {
			return nil, fmt.Errorf("%s: MAP group without one repeated key_value group", name)
		}
		kv := fields[0].Fields()
		if len(kv) < 1 || len(kv) > 2 || kv[0].Name() != "key" || kv[0].Repeated() || !kv[0].Leaf() {
			return nil, fmt.Errorf("%s: MAP key_value group without a key leaf", name)
		}
		n.kind = asmMap
		for _, f := range kv {
			c, err := buildNode(name+"."+f.Name(), f)
			if err != nil {
				return nil, err
			}
			n.fields = append(n.fields, c)
			n.nLeaves += c.nLeaves
		}
		return n, nil
	}
	n.kind = asmGroup
	for _, f := range fields {
		c, err := buildNode(f.Name(), f)
		if err != nil {
			return nil, err
		}
		n.fields = append(n.fields, c)
		n.nLeaves += c.nLeaves
	}
	if n.nLeaves == 0 {
		return nil, fmt.Errorf("%s: group without leaf columns", name)
	}
	return n, nil
}

// leafConverter returns the conversion of one leaf column's values into the
// generic value model.
func leafConverter(name string, t parquet.Type) (func(parquet.Value) (any, error), error) {
	lt := logicalOf(t)
	switch t.Kind() {
	case parquet.Boolean:
		return func(v parquet.Value) (any, error) { return v.Boolean(), nil }, nil
	case parquet.Int32:
		switch x := lt.(type) {
		case *format.DateType:
			return func(v parquet.Value) (any, error) {
				return time.Unix(int64(v.Int32())*86400, 0).UTC().Format(time.DateOnly), nil
			}, nil
		case *format.DecimalType:
			scale := math.Pow10(int(x.Scale))
			return func(v parquet.Value) (any, error) { return float64(v.Int32()) / scale, nil }, nil
		case *format.IntType:
			if !x.IsSigned {
				return func(v parquet.Value) (any, error) { return int64(uint32(v.Int32())), nil }, nil
			}
		}
		return func(v parquet.Value) (any, error) { return int64(v.Int32()), nil }, nil
	case parquet.Int64:
		switch x := lt.(type) {
		case *format.TimestampType:
			var unit time.Duration
			switch x.Unit.Value.(type) {
			case *format.MilliSeconds:
				unit = time.Millisecond
			case *format.MicroSeconds:
				unit = time.Microsecond
			default:
				unit = time.Nanosecond
			}
			return func(v parquet.Value) (any, error) {
				i := v.Int64()
				sec, rem := i/int64(time.Second/unit), i%int64(time.Second/unit)
				return time.Unix(sec, rem*int64(unit)).UTC().Format(time.RFC3339Nano), nil
			}, nil
		case *format.DecimalType:
			scale := math.Pow10(int(x.Scale))
			return func(v parquet.Value) (any, error) { return float64(v.Int64()) / scale, nil }, nil
		case *format.IntType:
			if !x.IsSigned {
				return func(v parquet.Value) (any, error) {
					if v.Int64() < 0 {
						return nil, fmt.Errorf("unsigned value %d overflows int64", uint64(v.Int64()))
					}
					return v.Int64(), nil
				}, nil
			}
		}
		return func(v parquet.Value) (any, error) { return v.Int64(), nil }, nil
	case parquet.Int96:
		// Legacy (Impala/Spark) timestamps: nanoseconds of the day, then
		// the Julian day number.
		return func(v parquet.Value) (any, error) {
			x := v.Int96()
			nanos := int64(x[1])<<32 | int64(x[0])
			days := int64(x[2]) - 2440588 // Julian day of 1970-01-01
			return time.Unix(days*86400, nanos).UTC().Format(time.RFC3339Nano), nil
		}, nil
	case parquet.Float:
		return func(v parquet.Value) (any, error) { return float64(v.Float()), nil }, nil
	case parquet.Double:
		return func(v parquet.Value) (any, error) { return v.Double(), nil }, nil
	case parquet.ByteArray, parquet.FixedLenByteArray:
		switch lt.(type) {
		case *format.UUIDType:
			return func(v parquet.Value) (any, error) {
				b := v.ByteArray()
				if len(b) != 16 {
					return nil, fmt.Errorf("UUID of %d bytes", len(b))
				}
				h := hex.EncodeToString(b)
				return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
			}, nil
		case *format.DecimalType:
			return nil, fmt.Errorf("%s: byte-array DECIMAL columns are not supported", name)
		}
		return func(v parquet.Value) (any, error) { return string(v.ByteArray()), nil }, nil
	}
	return nil, fmt.Errorf("%s: unsupported parquet type %s", name, t)
}

// logicalOf returns a type's logical annotation, nil when it has none.
func logicalOf(t parquet.Type) format.LogicalTypeValue {
	lt := t.LogicalType()
	if lt == nil {
		return nil
	}
	return lt.Value
}

type levels struct{ rep, def int }

// assembleRow splits a row into its leaf columns and assembles the record.
// cols is scratch space of root.nLeaves entries.
func assembleRow(root *asmNode, row parquet.Row, cols [][]parquet.Value) (map[string]any, error) {
	if len(cols) != root.nLeaves {
		return nil, fmt.Errorf("%d column slots for %d leaf columns", len(cols), root.nLeaves)
	}
	start := 0
	for c := range cols {
		end := start
		for end < len(row) && row[end].Column() == c {
			end++
		}
		if end == start {
			return nil, fmt.Errorf("row has no value for leaf column %d", c)
		}
		cols[c] = row[start:end]
		start = end
	}
	if start != len(row) {
		return nil, fmt.Errorf("row has values out of column order (column %d at %d)", row[start].Column(), start)
	}
	v, err := assembleGroup(root, levels{}, cols)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// assembleValue assembles one instance of n from the values of its leaf
// columns, already cut to this instance.
func assembleValue(n *asmNode, lv levels, cols [][]parquet.Value) (any, error) {
	if len(cols[0]) == 0 {
		return nil, errShortRow
	}
	if n.optional {
		lv.def++
		if cols[0][0].DefinitionLevel() < lv.def {
			return nil, nil
		}
	}
	if n.repeated {
		return assembleRepeated(lv, cols, func(lv levels, cols [][]parquet.Value) (any, error) {
			return assembleRequired(n, lv, cols)
		})
	}
	return assembleRequired(n, lv, cols)
}

func assembleRequired(n *asmNode, lv levels, cols [][]parquet.Value) (any, error) {
	switch n.kind {
	case asmLeaf:
		v := cols[0][0]
		if v.IsNull() || v.DefinitionLevel() != lv.def {
			return nil, fmt.Errorf("%s: definition level %d where %d is required", n.name, v.DefinitionLevel(), lv.def)
		}
		out, err := n.conv(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.name, err)
		}
		return out, nil
	case asmGroup:
		return assembleGroup(n, lv, cols)
	case asmList:
		elem := n.fields[0]
		return assembleRepeated(lv, cols, func(lv levels, cols [][]parquet.Value) (any, error) {
			return assembleValue(elem, lv, cols)
		})
	case asmMap:
		m := make(map[string]any)
		key := n.fields[0]
		_, err := assembleRepeated(lv, cols, func(lv levels, cols [][]parquet.Value) (any, error) {
			k, err := assembleValue(key, lv, cols[:1])
			if err != nil {
				return nil, err
			}
			ks, err := scalarText(k)
			if err != nil {
				return nil, fmt.Errorf("%s: map key: %w", n.name, err)
			}
			var v any
			if len(n.fields) == 2 {
				if v, err = assembleValue(n.fields[1], lv, cols[1:]); err != nil {
					return nil, err
				}
			}
			m[ks] = v
			return nil, nil
		})
		if err != nil {
			return nil, err
		}
		return m, nil
	}
	return nil, fmt.Errorf("%s: unknown node kind %d", n.name, n.kind)
}

func assembleGroup(n *asmNode, lv levels, cols [][]parquet.Value) (map[string]any, error) {
	m := make(map[string]any, len(n.fields))
	off := 0
	for _, f := range n.fields {
		v, err := assembleValue(f, lv, cols[off:off+f.nLeaves])
		if err != nil {
			return nil, err
		}
		m[f.name] = v
		off += f.nLeaves
	}
	return m, nil
}

// assembleRepeated cuts the values of a repeated field into its elements
// and assembles each with elem. A value starts a new element when its
// repetition level is at most the field's own.
func assembleRepeated(lv levels, cols [][]parquet.Value, elem func(levels, [][]parquet.Value) (any, error)) ([]any, error) {
	lv.rep++
	lv.def++
	if len(cols[0]) == 0 {
		return nil, errShortRow
	}
	if cols[0][0].DefinitionLevel() < lv.def {
		return []any{}, nil
	}
	n := 1
	for _, v := range cols[0][1:] {
		if v.RepetitionLevel() <= lv.rep {
			n++
		}
	}
	out := make([]any, n)
	rest := make([][]parquet.Value, 2*len(cols))
	sub := rest[len(cols):]
	rest = rest[:len(cols)]
	copy(rest, cols)
	for i := range out {
		for j, c := range rest {
			if len(c) == 0 {
				return nil, errShortRow
			}
			k := 1
			for k < len(c) && c[k].RepetitionLevel() > lv.rep {
				k++
			}
			sub[j], rest[j] = c[:k], c[k:]
		}
		v, err := elem(lv, sub)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	for j, c := range rest {
		if len(c) != 0 {
			return nil, fmt.Errorf("leaf column %d has %d values beyond its %d elements", j, len(c), n)
		}
	}
	return out, nil
}
