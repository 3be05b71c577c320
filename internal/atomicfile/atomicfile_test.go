package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestWriteReplacesOnlyOnSuccess(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.txt")
	if err := WriteFile(p, []byte("one")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(p, func(w io.Writer) error {
		w.Write([]byte("half"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
	got, _ := os.ReadFile(p)
	if string(got) != "one" {
		t.Errorf("a failed write changed the file to %q", got)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if err := WriteFile(filepath.Join(dir, "missing", "f"), nil); err == nil {
		t.Error("writing into a missing folder succeeded")
	}
}

// Only regular files are replaced; a symbolic link is written through to
// its regular target.
func TestWriteDestinations(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "target.txt")
	os.WriteFile(target, []byte("old"), 0o644)
	link := filepath.Join(dir, "link.txt")
	os.Symlink(target, link)
	dangling := filepath.Join(dir, "dangling")
	os.Symlink(filepath.Join(dir, "nowhere"), dangling)
	toDev := filepath.Join(dir, "todev")
	os.Symlink("/dev/null", toDev)
	for _, tc := range []struct{ path, want string }{
		{"/dev/null", "/dev/null: a character device, not a regular file: refusing to replace it"},
		{fifo, fifo + ": a named pipe (FIFO), not a regular file"},
		{dir, dir + ": a folder, not a regular file"},
		{dangling, dangling + ": a symbolic link to a missing file"},
		{toDev, toDev + ": a symbolic link to /dev/null (a character device)"},
	} {
		if err := WriteFile(tc.path, []byte("x")); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.path, err, tc.want)
		}
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v %v", st, err)
	}
	if err := WriteFile(link, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(target); string(got) != "new" {
		t.Errorf("the link's target holds %q", got)
	}
	if st, _ := os.Lstat(link); st.Mode()&os.ModeSymlink == 0 {
		t.Error("the link was replaced by a file")
	}
}

// WriteDir replaces a folder in one exchange and removes what a killed
// run left.
func TestWriteDir(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "out")
	write := func(content string) error {
		return WriteDir(dir, func(tmp string) error {
			return os.WriteFile(filepath.Join(tmp, "f"), []byte(content), 0o644)
		})
	}
	if err := write("one"); err != nil {
		t.Fatal(err)
	}
	// A run killed after filling its folder, and one killed after the
	// exchange, before removing the old folder.
	for _, name := range []string{".out.tmp-123", ".out.tmp-456-old"} {
		os.MkdirAll(filepath.Join(parent, name, "sub"), 0o755)
	}
	boom := errors.New("boom")
	if err := WriteDir(dir, func(tmp string) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("a failing fill: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "f")); string(got) != "one" {
		t.Errorf("a failed write changed the folder: %q", got)
	}
	if err := write("two"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "f")); string(got) != "two" {
		t.Errorf("the folder holds %q", got)
	}
	entries, _ := os.ReadDir(parent)
	if len(entries) != 1 {
		t.Errorf("leftovers: %v", entries)
	}
	if err := WriteDir("/dev/null/x", func(string) error { return nil }); err == nil {
		t.Error("a folder under /dev/null")
	}
	os.WriteFile(filepath.Join(parent, "file"), nil, 0o644)
	if err := WriteDir(filepath.Join(parent, "file"), func(string) error { return nil }); err == nil || !strings.Contains(err.Error(), "a regular file, not a folder") {
		t.Errorf("replacing a file with a folder: %v", err)
	}
}
