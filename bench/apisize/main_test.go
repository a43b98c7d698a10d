package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMeasure(t *testing.T) {
	dir := t.TempDir()
	src := `package p

const A, b = 1, 2

var V int

type T struct {
	F, g int
	H    string
}

type I interface {
	M()
	n()
}

func (T) Method() {}

func (T) hidden() {}

func Long() {
	_ = 1
	_ = 2
	_ = 3
}
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "p_test.go"), []byte("package p\n\nfunc TestX() {}\n"), 0o644)
	s, err := measure(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A, V, T, I, Long; with T.F, T.H, I.M and T.Method.
	if s.topLevel != 5 || s.withMembers != 9 {
		t.Errorf("measure = %d top-level, %d with members; want 5, 9", s.topLevel, s.withMembers)
	}
	if s.largest != "Long" || s.largestLen != 5 {
		t.Errorf("largest = %s, %d lines; want Long, 5", s.largest, s.largestLen)
	}
}
