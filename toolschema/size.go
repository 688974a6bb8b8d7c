package toolschema

import (
	"math/bits"
	"reflect"
	"unsafe"
)

// heapSize is the heap a value holds: every object reachable from it
// through pointers, slices, strings, maps and interfaces, once each, with
// the rounding of Go's allocator. A compiled schema takes from 4 to over
// 70 times its text depending on its shape (an enum of strings little, a
// pattern or a nesting of objects much), so the catalog weighs each one
// rather than guess from its text. The value's own top-level bytes are not
// counted: a pointer's target is.
func heapSize(v any) int64 {
	s := sizer{seen: make(map[uintptr]struct{})}
	s.walk(reflect.ValueOf(&v).Elem())
	return s.n
}

type sizer struct {
	seen map[uintptr]struct{}
	n    int64
}

// first reports whether the object at p is met for the first time.
func (s *sizer) first(p uintptr) bool {
	if _, ok := s.seen[p]; ok {
		return false
	}
	s.seen[p] = struct{}{}
	return true
}

// walk counts what v refers to (the bytes of v itself are its container's).
func (s *sizer) walk(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if n := v.Len(); n > 0 && s.first(uintptr(unsafe.Pointer(unsafe.StringData(v.String())))) {
			s.n += allocated(n)
		}
	case reflect.Pointer:
		if v.IsNil() || !s.first(v.Pointer()) {
			return
		}
		s.n += allocated(int(v.Type().Elem().Size()))
		s.walk(v.Elem())
	case reflect.Slice:
		if v.IsNil() || v.Cap() == 0 || !s.first(v.Pointer()) {
			return
		}
		s.n += allocated(v.Cap() * int(v.Type().Elem().Size()))
		if refers(v.Type().Elem()) {
			for i := range v.Len() {
				s.walk(v.Index(i))
			}
		}
	case reflect.Array:
		if refers(v.Type().Elem()) {
			for i := range v.Len() {
				s.walk(v.Index(i))
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			s.walk(v.Field(i))
		}
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		e := v.Elem()
		switch e.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
			// Held in the interface word itself.
		default:
			s.n += allocated(int(e.Type().Size())) // boxed
		}
		s.walk(e)
	case reflect.Map:
		if v.IsNil() || !s.first(v.Pointer()) {
			return
		}
		s.n += mapBytes(v.Len(), int(v.Type().Key().Size()+v.Type().Elem().Size()))
		it := v.MapRange()
		for it.Next() {
			s.walk(it.Key())
			s.walk(it.Value())
		}
	}
}

// refers reports whether values of t can hold a reference to the heap.
func refers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	case reflect.Array:
		return refers(t.Elem())
	}
	return true
}

// allocated is what the allocator takes for an object of n bytes: n
// rounded up to a size class at least as large as Go's (a multiple of 16,
// or of a quarter of the power of two below n), or to whole 8 KiB pages
// past 32 KiB.
func allocated(n int) int64 {
	switch {
	case n <= 0:
		return 0
	case n <= 16:
		return int64(n+7) &^ 7
	case n > 32<<10:
		return int64(n+8<<10-1) &^ (8<<10 - 1)
	}
	step := max(16, 1<<(bits.Len(uint(n-1))-3))
	return int64(n+step-1) &^ int64(step-1)
}

// mapBytes is what a map of n entries of slot bytes each takes: groups of
// eight slots and their control word, filled to between 7/16 and 7/8 (the
// emptiest is counted), and its header.
func mapBytes(n, slot int) int64 {
	groups := (2*n + 6) / 7
	return 48 + allocated(groups*(8+8*slot))
}
