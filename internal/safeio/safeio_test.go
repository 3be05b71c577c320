package safeio

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(dir, "small")
	os.WriteFile(small, []byte("hello"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(small, link)
	for _, tc := range []struct {
		path  string
		limit int64
		want  string // error text, or the content
	}{
		{small, 5, "hello"},
		{link, 5, "hello"},
		{small, 4, small + ": 5 bytes, more than the 4 this input may have"},
		{"/dev/zero", 1 << 20, "/dev/zero: a character device, not a regular file: refusing to read it"},
		{fifo, 1 << 20, fifo + ": a named pipe (FIFO), not a regular file"},
		{dir, 1 << 20, dir + ": a folder, not a regular file"},
		{filepath.Join(dir, "missing"), 1, "no such file"},
	} {
		start := time.Now()
		b, err := ReadFile(tc.path, tc.limit)
		got := string(b)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.path, got, tc.want)
		}
		if time.Since(start) > 5*time.Second {
			t.Errorf("%s took %s", tc.path, time.Since(start))
		}
	}
	var nr *NotRegularError
	if _, err := ReadFile("/dev/null", 1); !errors.As(err, &nr) {
		t.Errorf("/dev/null: %v, want a NotRegularError", err)
	}
	if err := CheckRegular(fifo); !errors.As(err, &nr) {
		t.Errorf("CheckRegular(fifo): %v", err)
	}
	if err := CheckRegular(dir); err != nil {
		t.Errorf("CheckRegular(folder): %v", err)
	}
	// A stream is cut at its bound.
	if _, err := ReadAll(strings.NewReader(strings.Repeat("x", 11)), "stdin", 10); err == nil || !strings.Contains(err.Error(), "stdin: more than 10 bytes") {
		t.Errorf("ReadAll: %v", err)
	}
}
