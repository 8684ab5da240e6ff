package lower

import (
	"reflect"
	"testing"

	"hap/ir"
)

// TestAlikeComparesEveryField: a tensor, op or attribute set that differs
// from another in any one field is not alike it, but for the attributes
// that place a device's piece (Start, Offset, Rank) and a graph's name; so
// a field added to ir.Graph, ir.Tensor, ir.Op or ir.Attrs fails here until
// alikeButPositions compares it, rather than letting devices that differ
// in it share a step.
func TestAlikeComparesEveryField(t *testing.T) {
	positions := map[string]bool{"Start": true, "Offset": true, "Rank": true}
	eachField(t, reflect.TypeFor[ir.Attrs](), func(name string, set func(reflect.Value)) {
		var a, b ir.Attrs
		set(reflect.ValueOf(&b).Elem())
		if got := attrsAlike(&a, &b); got != positions[name] {
			t.Errorf("Attrs differing in %s alike: %v, want %v", name, got, positions[name])
		}
	})
	eachField(t, reflect.TypeFor[ir.Op](), func(name string, set func(reflect.Value)) {
		var a, b ir.Op
		set(reflect.ValueOf(&b).Elem())
		if name == "Attrs" {
			b.Attrs.Axis = 1 // set sets a struct field's first field
		}
		if opsAlike(&a, &b) {
			t.Errorf("Ops differing in %s are alike", name)
		}
	})
	eachField(t, reflect.TypeFor[ir.Graph](), func(name string, set func(reflect.Value)) {
		var a, b ir.Graph
		set(reflect.ValueOf(&b).Elem())
		if got := alikeButPositions(&a, &b); got != (name == "Name") {
			t.Errorf("Graphs differing in %s alike: %v, want %v", name, got, name == "Name")
		}
	})
	eachField(t, reflect.TypeFor[ir.Tensor](), func(name string, set func(reflect.Value)) {
		var a, b ir.Tensor
		set(reflect.ValueOf(&b).Elem())
		if tensorsAlike(&a, &b) {
			t.Errorf("Tensors differing in %s are alike", name)
		}
	})
}

// eachField calls f for every field of struct type typ with a function
// that sets that field of a value of typ to something other than zero.
func eachField(t *testing.T, typ reflect.Type, f func(name string, set func(reflect.Value))) {
	t.Helper()
	for i := range typ.NumField() {
		field := typ.Field(i)
		set := func(v reflect.Value) {
			fv := v.Field(i)
			switch fv.Kind() {
			case reflect.Int, reflect.Int32, reflect.Int64, reflect.Int8, reflect.Int16:
				fv.SetInt(1)
			case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				fv.SetUint(1)
			case reflect.Float32, reflect.Float64:
				fv.SetFloat(1)
			case reflect.Bool:
				fv.SetBool(true)
			case reflect.String:
				fv.SetString("x")
			case reflect.Slice:
				fv.Set(reflect.MakeSlice(fv.Type(), 1, 1))
			case reflect.Pointer:
				fv.Set(reflect.New(fv.Type().Elem()))
			case reflect.Struct:
				// Set by the caller (Op.Attrs).
			default:
				t.Fatalf("%s.%s: a %s field this test cannot set", typ.Name(), field.Name, fv.Kind())
			}
		}
		f(field.Name, set)
	}
}
