//go:build !unix

// Package mmap maps model files read-only, so that importers can hand out
// weights that view the file instead of copying it.
package mmap

import (
	"fmt"
	"io"
	"os"
)

// Map reads the first size bytes of f where memory mapping is not
// available (Windows, js/wasm); unmap does nothing.
func Map(f *os.File, size int64) (data []byte, unmap func() error, err error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, nil, fmt.Errorf("cannot read %d bytes", size)
	}
	data = make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, size), data); err != nil {
		return nil, nil, fmt.Errorf("read: %w", err)
	}
	return data, func() error { return nil }, nil
}
