package genrt

import (
	"reflect"
	"testing"
)

// TestLimitsSameSeesEveryField: a generated Decoder keeps its resolved
// limits while same holds, so same must notice a change to any field,
// including one added after it was written.
func TestLimitsSameSeesEveryField(t *testing.T) {
	var base Limits
	n := reflect.TypeOf(base).NumField()
	for i := range n {
		changed := base
		f := reflect.ValueOf(&changed).Elem().Field(i)
		switch f.Kind() {
		case reflect.Int:
			f.SetInt(1)
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		default:
			t.Fatalf("field %s is a %v: teach this test and same about it", reflect.TypeOf(base).Field(i).Name, f.Kind())
		}
		if base.same(&changed) || changed.same(&base) {
			t.Errorf("same misses a change to %s", reflect.TypeOf(base).Field(i).Name)
		}
	}
	if !base.same(&base) {
		t.Error("same denies equal limits")
	}
}
