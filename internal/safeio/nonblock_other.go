//go:build !unix

package safeio

// Other systems have no FIFOs that block an open.
const nonBlock = 0
