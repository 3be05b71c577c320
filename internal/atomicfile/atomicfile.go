// Package atomicfile writes files and folders so that readers see the old
// content or the complete new content, never a half-written one: data goes
// to a temporary file (or folder) beside the destination, which is synced
// and renamed into place.
//
// Destinations are checked first. Only a regular file is replaced: a
// device (/dev/full), a named pipe, a socket or a folder at the path is
// refused by name. A symbolic link is followed: the file it points to (which
// must be a regular file or not exist yet) is replaced, in its own folder,
// and the link stays.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tapml/tapml/internal/safeio"
)

// Destination returns the path a write to path replaces: path itself, or
// the target of the symbolic link(s) at path. It fails, naming path, when
// that is not a regular file or a path that does not exist yet.
func Destination(path string) (string, error) {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return path, nil
	}
	if err != nil {
		return "", err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(path)
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s: a symbolic link to a missing file: refusing to write through it", path)
		}
		if err != nil {
			return "", err
		}
		if st, err = os.Stat(target); err != nil {
			return "", err
		}
		if !st.Mode().IsRegular() {
			return "", fmt.Errorf("%s: a symbolic link to %s (%s): refusing to replace it", path, target, safeio.Kind(st.Mode()))
		}
		return target, nil
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s: %s, not a regular file: refusing to replace it", path, safeio.Kind(st.Mode()))
	}
	return path, nil
}

// Write creates or replaces path (mode 0644) with what fill writes. When
// fill or any step fails, path is untouched and the temporary file is
// removed.
func Write(path string, fill func(w io.Writer) error) (err error) {
	path, err = Destination(path)
	if err != nil {
		return err
	}
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

// WriteFile creates or replaces path (mode 0644) holding data.
func WriteFile(path string, data []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// tmpDirPattern names the temporary folders of WriteDir beside dir; what a
// killed run leaves under such a name is removed by the next WriteDir of
// dir.
func tmpDirPrefix(dir string) string { return "." + filepath.Base(dir) + ".tmp-" }

// WriteDir writes the folder dir atomically: fill writes the files into a
// new temporary folder beside dir, which then takes dir's place in one step.
// An existing dir is exchanged with it (renameat2 RENAME_EXCHANGE on Linux),
// so that at every moment dir is the old folder or the new one, never
// missing; the old one is then removed. The caller checks first that dir
// may be replaced. Leftovers of an earlier run that was killed are removed
// first. On failure dir is as it was.
func WriteDir(dir string, fill func(tmp string) error) (err error) {
	dir = filepath.Clean(dir)
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	CleanLeftovers(dir)
	tmp, err := os.MkdirTemp(parent, tmpDirPrefix(dir)+"*")
	if err != nil {
		return err
	}
	defer func() {
		os.RemoveAll(tmp) // on success it holds the old folder, if any
	}()
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp makes it private
		return err
	}
	if err := fill(tmp); err != nil {
		return err
	}
	if err := syncDir(tmp); err != nil {
		return err
	}
	st, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		err = os.Rename(tmp, dir)
	case err != nil:
	case !st.IsDir():
		err = fmt.Errorf("%s: %s, not a folder: refusing to replace it", dir, safeio.Kind(st.Mode()))
	default:
		err = exchange(tmp, dir)
	}
	if err != nil {
		return err
	}
	syncDir(parent)
	return nil
}

// CleanLeftovers removes the temporary folders that WriteDir runs of dir
// left behind when they were killed.
func CleanLeftovers(dir string) {
	dir = filepath.Clean(dir)
	entries, err := os.ReadDir(filepath.Dir(dir))
	if err != nil {
		return
	}
	prefix := tmpDirPrefix(dir)
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
			os.RemoveAll(filepath.Join(filepath.Dir(dir), e.Name()))
		}
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	d.Sync() // not every file system syncs folders; the files themselves are synced
	return nil
}

// moveAside replaces dir with tmp in two renames: dir moves to a name that
// CleanLeftovers knows, tmp takes its place, and the old folder is moved
// into tmp's name for the caller to remove. A failure puts dir back.
func moveAside(tmp, dir string) error {
	old := tmp + "-old"
	if err := os.Rename(dir, old); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if rerr := os.Rename(old, dir); rerr != nil {
			return fmt.Errorf("%w (and restoring the previous folder from %s failed: %v)", err, old, rerr)
		}
		return err
	}
	return os.Rename(old, tmp)
}
