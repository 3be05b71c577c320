//go:build !darwin || !cgo

package metal

import (
	"fmt"
	"runtime"
)

// Open opens the system's default Metal device. Metal exists only on
// Apple platforms: on this build it returns ErrUnsupported (on macOS built
// with CGO_ENABLED=0, an error saying that cgo is needed).
func Open(opts Options) (*Device, error) {
	if runtime.GOOS == "darwin" {
		return nil, fmt.Errorf("%w (this tapmlc was built without cgo; rebuild with CGO_ENABLED=1)", ErrUnsupported)
	}
	return nil, ErrUnsupported
}
