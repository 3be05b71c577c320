//go:build unix

package safeio

import "syscall"

const nonBlock = syscall.O_NONBLOCK
