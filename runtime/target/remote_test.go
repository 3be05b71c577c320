package target

import (
	"github.com/tapml/tapml/ir"
	"strings"
	"testing"
)

func TestRemoteTarget(t *testing.T) {
	if !IsRemote("remote:ws://127.0.0.1:8765") || IsRemote("webgpu") {
		t.Error("IsRemote")
	}
	if !Supports("remote:ws://127.0.0.1:8765", ir.OpMatmul) || Supports("remote:ws://h:1", ir.OpNone) {
		t.Error("a remote target supports what codegen/wgsl does")
	}
	for _, tc := range []struct{ target, want string }{
		{"remote:http://127.0.0.1:1", "ws:// or wss://"},
		{"remote:ws://127.0.0.1:1", "cannot connect"},
		{"remote:ws://127.0.0.1:1?token=hidden", "cannot connect"},
	} {
		_, err := Open(tc.target, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "hidden") {
			t.Errorf("%s: %v, want %q (and no token)", tc.target, err, tc.want)
		}
	}
}
