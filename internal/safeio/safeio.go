// Package safeio opens and reads the files a user names (models,
// pipelines, manifests, tolerance files, tensors) so that a hostile or
// careless path cannot hang or exhaust the process: only regular files are
// read, and every read has a size bound. A named pipe, a device such as
// /dev/zero, a socket or a folder is refused by name before anything is
// read. Opening never blocks: a FIFO is opened non-blocking, seen to be a
// FIFO, and closed.
package safeio

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Limits of the small text inputs, shared by their readers.
const (
	// MaxConfig bounds YAML configuration files: pipelines and tolerance
	// overrides.
	MaxConfig = 1 << 20
	// MaxManifest bounds the manifests of test bundles and build folders
	// (a case takes about 1 KiB).
	MaxManifest = 64 << 20
	// MaxText bounds IR text files and kernel sources of build folders.
	MaxText = 256 << 20
	// MaxTensor bounds a tensor file read whole (--input).
	MaxTensor = 8 << 30
)

// Kind names the kind of a file mode, for messages: "a named pipe (FIFO)",
// "a character device", ...
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a folder"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}

// NotRegularError reports a path that is not a regular file.
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s: %s, not a regular file: refusing to read it", e.Path, Kind(e.Mode))
}

// TooLargeError reports a file over its size bound.
type TooLargeError struct {
	Path  string
	Size  int64 // -1 when unknown (a stream read past the bound)
	Limit int64
}

func (e *TooLargeError) Error() string {
	if e.Size < 0 {
		return fmt.Sprintf("%s: more than %d bytes, the most this input may have", e.Path, e.Limit)
	}
	return fmt.Sprintf("%s: %d bytes, more than the %d this input may have", e.Path, e.Size, e.Limit)
}

// Open opens a regular file for reading (symbolic links are followed) and
// returns it with its information. Anything else is a *NotRegularError.
func Open(path string) (*os.File, fs.FileInfo, error) {
	// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
	// writer. It does nothing to regular files.
	f, err := os.OpenFile(path, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, &NotRegularError{Path: path, Mode: st.Mode()}
	}
	return f, st, nil
}

// CheckRegular returns a *NotRegularError when path exists and is neither a
// regular file nor a folder (folders are models and bundles); a missing
// path is the caller's to report.
func CheckRegular(path string) error {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() && !st.IsDir() {
		return &NotRegularError{Path: path, Mode: st.Mode()}
	}
	return nil
}

// ReadFile reads a regular file of at most limit bytes.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, st, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.Size() > limit {
		return nil, &TooLargeError{Path: path, Size: st.Size(), Limit: limit}
	}
	// The size is a hint: a file that grows meanwhile (or a /proc file
	// that claims 0) is still cut at the bound.
	return ReadAll(f, path, limit)
}

// ReadAll reads r to its end, or fails with a *TooLargeError naming what
// once more than limit bytes came (for streams, where a pipe is legitimate).
func ReadAll(r io.Reader, what string, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if int64(len(b)) > limit {
		return nil, &TooLargeError{Path: what, Size: -1, Limit: limit}
	}
	return b, nil
}
