//go:build !linux

package atomicfile

// exchange replaces dir with tmp; tmp then holds the old folder. Without
// Linux's renameat2 there is a moment when dir is missing.
func exchange(tmp, dir string) error { return moveAside(tmp, dir) }
