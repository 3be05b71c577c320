// Package atomicfile writes files so that readers see the old content or
// the complete new content, never a half-written file: data goes to a
// temporary file in the same folder, which is synced and renamed into place.
package atomicfile

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
)

// Write creates path (mode 0644) with what fill writes. When fill or any
// step fails, path is untouched and the temporary file is removed.
func Write(path string, fill func(w io.Writer) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := fill(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := tmp.Chmod(0o644); err != nil { // CreateTemp makes it private
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// WriteFile creates path (mode 0644) holding data.
func WriteFile(path string, data []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
