//go:build !unix

package hf

import (
	"fmt"
	"io"
	"os"
)

// mapFile reads the first size bytes of f where memory mapping is not
// available (Windows, js/wasm).
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, nil, fmt.Errorf("cannot read %d bytes", size)
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, size), data); err != nil {
		return nil, nil, fmt.Errorf("read: %w", err)
	}
	return data, func() error { return nil }, nil
}
