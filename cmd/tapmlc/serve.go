package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/tapml/tapml/runtime/remote"
	"github.com/tapml/tapml/runtime/remote/browser"
	"github.com/tapml/tapml/runtime/remote/device"
	"github.com/tapml/tapml/runtime/webgpu"
)

func init() {
	var (
		listen     string
		token      string
		useBrowser bool
		backend    string
		wasm       string
		cacheDir   string
		cacheMB    int64
	)
	cmd := &cobra.Command{
		Use:   "serve --listen 127.0.0.1:PORT [--token T] [--browser]",
		Short: "Serve a device to remote hosts over WebSocket (this machine's GPU, or a browser page)",
		Long: `Serve a device that hosts use with --target remote:ws://HOST:PORT (run, test,
migrate). The host generates the kernels; the server compiles and runs them,
keeps the buffers, and caches weights by content hash so that a weight
crosses the network once per server.

Without --browser, kernels run on this machine's WebGPU device (--backend).
With --browser, the server serves a page at http://HOST:PORT/: open it in a
browser with WebGPU, and the server relays each host session to that page,
whose Go program (built for js/wasm at start-up from the tapml source tree
into a cache folder, or given with --wasm) runs the kernels on the
browser's WebGPU. One host uses the page at a time.

SECURITY: anyone who can connect can run arbitrary GPU kernels on the device
and read and write its buffers (and the cached weights' contents); a hostile
kernel can hang the GPU or crash the driver and the server. There is no
TLS. The server listens on loopback (127.0.0.1) unless told otherwise;
to serve other machines, set --token (or $TAPML_TOKEN; hosts pass
?token=T in the URL or $TAPML_TOKEN) and use a trusted network, or tunnel
over SSH. Browser pages of other sites cannot connect (the WebSocket origin
is checked).

Logs go to stderr, one line per connection; the line "listening on
ws://HOST:PORT" says where the server listens (--listen with port 0 picks one).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if token == "" {
				token = os.Getenv("TAPML_TOKEN")
			}
			logger := log.New(os.Stderr, "tapmlc serve: ", log.LstdFlags)
			host, _, err := net.SplitHostPort(listen)
			if err != nil {
				return fmt.Errorf("--listen %q: %v (want HOST:PORT, like 127.0.0.1:8765)", listen, err)
			}
			if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" && token == "" {
				logger.Printf("WARNING: listening on %s without a token: anyone who can reach it can run GPU kernels and read device memory; set --token", host)
			}
			opts := remote.ServerOptions{Token: token, Log: logger}
			var closeDev func()
			if useBrowser {
				var prog *browser.Program
				if wasm != "" {
					prog, err = browser.Prebuilt(wasm)
				} else {
					prog, err = browser.Build(cmd.Context(), cacheDir, os.Stderr)
				}
				if err != nil {
					return err
				}
				opts.Relay, opts.Page = true, prog.Handler()
			} else {
				dev, err := webgpu.Open(webgpu.Options{Backend: backend})
				if err != nil {
					return err
				}
				closeDev = func() { dev.Close() }
				opts.Core = device.New(device.Native(dev), device.Options{CacheBytes: cacheMB << 20})
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				if closeDev != nil {
					closeDev()
				}
				return err
			}
			addr := ln.Addr().String()
			if useBrowser {
				q := ""
				if token != "" {
					q = "?token=YOUR_TOKEN"
				}
				logger.Printf("listening on ws://%s: open http://%s/%s in a browser with WebGPU, then use --target remote:ws://%s%s", addr, addr, q, addr, q)
			} else {
				logger.Printf("listening on ws://%s: device %s (use --target remote:ws://%s)", addr, opts.Core.Info().Name, addr)
			}
			srv := &http.Server{Handler: remote.NewServer(opts), ReadHeaderTimeout: 10 * time.Second}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(ln) }()
			select {
			case err = <-errc:
			case <-ctx.Done():
				logger.Printf("stopping")
				sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				srv.Shutdown(sctx)
				cancel()
				err = nil
			}
			if closeDev != nil {
				closeDev()
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8765", "address to listen on (HOST:PORT; port 0 picks a free one, printed on stderr)")
	f.StringVar(&token, "token", "", "require this token from hosts and browser pages (default $TAPML_TOKEN)")
	f.BoolVar(&useBrowser, "browser", false, "serve a browser page as the device: the page runs the kernels on the browser's WebGPU")
	f.StringVar(&backend, "backend", "vulkan", "graphics API of the local device: vulkan or gl (without --browser)")
	f.StringVar(&wasm, "wasm", "", "prebuilt browser device program (GOOS=js GOARCH=wasm go build "+browser.Package+"); default: build it")
	f.StringVar(&cacheDir, "cache-dir", "", "folder for the built browser device program (default "+browser.DefaultCacheDir()+")")
	f.Int64Var(&cacheMB, "weight-cache-mb", 1024, "MiB of weights kept cached while no host uses them (without --browser)")
	rootCmd.AddCommand(cmd)
}
