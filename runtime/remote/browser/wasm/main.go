//go:build js && wasm

// Command wasm is tapml's browser device: built for GOOS=js GOARCH=wasm and
// loaded by the page `tapmlc serve --browser` serves, it attaches to that
// server over WebSocket (ws://HOST/attach, with the page's ?token=) and
// runs the requests of the host sessions the server relays to it on the
// browser's WebGPU, through the same device core (runtime/remote/device)
// as the native server. The page's status (globalThis.tapmlStatus) is
// "attached" while it serves; tests poll it.
package main

import (
	"context"
	"errors"
	"fmt"
	"syscall/js"
	"time"

	"github.com/coder/websocket"
	"github.com/tapml/tapml/runtime/remote/device"
	"github.com/tapml/tapml/runtime/remote/proto"
)

func logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if f := js.Global().Get("tapmlLog"); f.Type() == js.TypeFunction {
		f.Invoke(line)
	}
	js.Global().Get("console").Call("log", "tapml: "+line)
}

func status(s string) {
	if f := js.Global().Get("tapmlSetStatus"); f.Type() == js.TypeFunction {
		f.Invoke(s)
	} else {
		js.Global().Set("tapmlStatus", s)
	}
}

// refused is an attach the server will not accept again (wrong token, old
// page): no retry.
type refused struct{ msg string }

func (r refused) Error() string { return r.msg }

func main() {
	status("opening WebGPU")
	g, err := openGPU()
	if err != nil {
		status("error: " + err.Error())
		logf("%v", err)
		return
	}
	info := g.Info()
	logf("WebGPU device %s (%s), limits %+v", info.Name, info.Description, info.Limits)
	core := device.New(g, device.Options{CacheBytes: 256 << 20, MemoryBytes: 4 << 30})
	loc := js.Global().Get("location")
	scheme := "ws://"
	if loc.Get("protocol").String() == "https:" {
		scheme = "wss://"
	}
	url := scheme + loc.Get("host").String() + "/attach"
	token := js.Global().Get("URLSearchParams").New(loc.Get("search")).Call("get", "token")
	tok := ""
	if token.Type() == js.TypeString {
		tok = token.String()
	}
	for {
		err := serve(core, url, tok)
		var r refused
		if errors.As(err, &r) {
			status("refused: " + r.msg)
			logf("the server refused this page: %s", r.msg)
			return
		}
		status("disconnected; retrying")
		logf("connection to %s ended: %v; retrying in 1 s", url, err)
		time.Sleep(time.Second)
	}
}

// serve attaches to the server and answers its frames until the connection
// ends.
func serve(core *device.Core, url, token string) error {
	status("connecting")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		cancel()
		return err
	}
	defer c.CloseNow()
	c.SetReadLimit(proto.MaxFrame)
	if err := c.Write(ctx, websocket.MessageBinary, proto.Encode(1, &proto.Attach{Version: proto.Version, Token: token, Info: core.Info()})); err != nil {
		cancel()
		return err
	}
	_, b, err := c.Read(ctx)
	cancel()
	if err != nil {
		return err
	}
	_, m, err := proto.Decode(b)
	if err != nil {
		return err
	}
	if e, ok := m.(*proto.Error); ok {
		if e.Code == proto.CodeAuth || e.Code == proto.CodeVersion {
			return refused{e.Message}
		}
		return errors.New(e.Message)
	}
	status("attached")
	logf("attached to %s", url)
	s := core.NewSession()
	defer s.Close()
	n := 0
	for {
		_, b, err := c.Read(context.Background())
		if err != nil {
			return err
		}
		reply := s.Handle(b)
		n++
		if n%1000 == 0 {
			logf("%d requests served", n)
		}
		if err := c.Write(context.Background(), websocket.MessageBinary, reply); err != nil {
			return err
		}
	}
}
