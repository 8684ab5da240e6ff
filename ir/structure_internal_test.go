package ir

import (
	"reflect"
	"testing"
)

// opSignature writes attributes by hand; every field but the dropout
// seed must change it, so that a field added to Attrs cannot be left out
// unnoticed (ops differing in it would then tie).
func TestSignatureSeesEveryAttribute(t *testing.T) {
	g := &Graph{}
	base := &Op{Kind: OpAdd}
	want := string(opSignature(g, base, nil))
	v := reflect.ValueOf(&base.Attrs).Elem()
	for i := range v.NumField() {
		op := &Op{Kind: OpAdd}
		f := reflect.ValueOf(&op.Attrs).Elem().Field(i)
		switch f.Kind() {
		case reflect.Int:
			f.SetInt(3)
		case reflect.Uint64:
			f.SetUint(3)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Float64:
			f.SetFloat(0.5)
		case reflect.String:
			f.SetString("x")
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		default:
			t.Fatalf("Attrs.%s: kind %s not covered by this test", v.Type().Field(i).Name, f.Kind())
		}
		got := string(opSignature(g, op, nil))
		if name := v.Type().Field(i).Name; (got == want) != (name == "Seed") {
			t.Errorf("Attrs.%s set: signature %q, unset %q", name, got, want)
		}
	}
}
