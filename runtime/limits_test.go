package runtime

import (
	"strings"
	"testing"
)

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		err  bool
	}{
		{"16384", 16384, false},
		{"16KiB", 16 << 10, false},
		{"64 MiB", 64 << 20, false},
		{"2GiB", 2 << 30, false},
		{"0", 0, true},
		{"-1", 0, true},
		{"1.5MiB", 0, true},
		{"16KB", 0, true},
		{"MiB", 0, true},
		{"", 0, true},
		{"4294967296GiB", 0, true}, // 2^62 bytes and more
	} {
		got, err := ParseBytes(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestMaxBufferCap(t *testing.T) {
	t.Setenv(MaxBufferEnv, "")
	if c, err := MaxBufferCap(); c != 0 || err != nil {
		t.Errorf("unset: %d, %v", c, err)
	}
	t.Setenv(MaxBufferEnv, "lots")
	if _, err := MaxBufferCap(); err == nil || !strings.Contains(err.Error(), `$TAPML_MAX_BUFFER: "lots" is not a byte count`) {
		t.Errorf("bad value: %v", err)
	}
}

func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"16KiB", "1", "0", "18446744073709551615", "9GiB", " MiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseBytes(s)
		if err == nil && (n == 0 || n >= 1<<62) {
			t.Fatalf("ParseBytes(%q) = %d without an error", s, n)
		}
	})
}
