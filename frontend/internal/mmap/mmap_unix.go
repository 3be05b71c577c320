//go:build unix

// Package mmap maps model files read-only, so that importers can hand out
// weights that view the file instead of copying it.
package mmap

import (
	"fmt"
	"os"
	"syscall"
)

// Map maps the first size bytes of f read-only; unmap releases them.
func Map(f *os.File, size int64) (data []byte, unmap func() error, err error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, nil, fmt.Errorf("cannot map %d bytes", size)
	}
	data, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap: %w", err)
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
