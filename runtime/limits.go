package runtime

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// BufferLimits are the size limits of a device's tensors.
type BufferLimits struct {
	MaxBuffer  uint64 // bytes of the largest buffer it makes (0: none known)
	MaxBinding uint64 // bytes one kernel binding may span (0: none known)
	// MaxTensor is the largest tensor in bytes it holds in one buffer and
	// binds whole, after its allocator rounds sizes up (0: no limit).
	MaxTensor int64
}

// BufferLimiter is implemented by devices whose tensors have size limits;
// weights over MaxTensor are split (runtime/target.FitWeights).
type BufferLimiter interface {
	BufferLimits() BufferLimits
}

// MaxBufferEnv names the environment variable that caps the buffer and
// binding sizes tapml asks a device for and fits weights to, as a
// constrained browser or phone would: bytes, or a number with KiB, MiB or
// GiB ("64MiB").
const MaxBufferEnv = "TAPML_MAX_BUFFER"

// MaxBufferCap returns $TAPML_MAX_BUFFER in bytes, 0 when it is unset.
func MaxBufferCap() (uint64, error) {
	s := strings.TrimSpace(os.Getenv(MaxBufferEnv))
	if s == "" {
		return 0, nil
	}
	n, err := ParseBytes(s)
	if err != nil {
		return 0, fmt.Errorf("$%s: %w", MaxBufferEnv, err)
	}
	return n, nil
}

// ParseBytes parses a positive byte count: digits with an optional KiB,
// MiB or GiB suffix.
func ParseBytes(s string) (uint64, error) {
	mult := uint64(1)
	num := s
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n == 0 || n > (1<<62-1)/mult {
		return 0, fmt.Errorf("%q is not a byte count (a positive whole number, optionally followed by KiB, MiB or GiB, below 2^62 bytes)", s)
	}
	return n * mult, nil
}
