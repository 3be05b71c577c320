package llvm

// BreakNode makes the kernel of node id invalid IR on d, for tests of how
// clang's errors are reported.
func BreakNode(d *Device, id int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.breakNodes[id] = true
}
