package atomicfile

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// exchange swaps the folders tmp and dir in one step, so that dir is never
// missing; tmp then holds the old folder.
func exchange(tmp, dir string) error {
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, dir, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return moveAside(tmp, dir) // a file system without the exchange
	}
	if err != nil {
		return &os.LinkError{Op: "exchange", Old: tmp, New: dir, Err: err}
	}
	return nil
}
