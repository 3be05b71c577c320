package mmap

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMap(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("hello, mapping"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, unmap, err := Map(f, 5)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != "hello" {
		t.Errorf("mapped %q, want %q", data, "hello")
	}
	if err := unmap(); err != nil {
		t.Error(err)
	}
	if _, _, err := Map(f, 0); err == nil {
		t.Error("mapping 0 bytes: no error")
	}
}
