package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/tapml/tapml/runtime/remote"
	"github.com/tapml/tapml/runtime/remote/browser"
)

func init() {
	var (
		listen      string
		token       string
		useBrowser  bool
		useVulkan   bool
		backend     string
		wasm        string
		cacheDir    string
		cacheMB     int64
		memoryMB    int64
		maxSessions int
		maxConns    int
		allowHosts  []string
	)
	cmd := &cobra.Command{
		Use:   "serve --listen 127.0.0.1:PORT [--token T] [--browser | --vulkan]",
		Short: "Serve a device to remote hosts over WebSocket (this machine's GPU, or a browser page)",
		Long: `Serve a device that hosts use with --target remote:ws://HOST:PORT (run, test,
migrate). The host generates the kernels; the server compiles and runs them,
keeps the buffers, and caches weights by content hash so that a weight
crosses the network once per server.

Without --browser, kernels run on this machine's WebGPU device (--backend).
With --vulkan, they run on tapml's own Vulkan device, as on the vulkan target:
the WGSL the host sends is translated to SPIR-V (codegen/spirv), and where
the device has f16 (shaderFloat16 and 16-bit storage) it offers shader-f16,
so that hosts can run --compute f16 (WebGPU's naga takes no f16).
With --browser, the server serves a page at http://HOST:PORT/: open it in a
browser with WebGPU, and the server relays each host session to that page,
whose Go program (built for js/wasm at start-up from the tapml source tree
into a cache folder, or given with --wasm) runs the kernels on the
browser's WebGPU. One host uses the page at a time.

Each host session runs in a worker process (this binary, restarted when it
dies), so a kernel that crashes the driver ends that session only. Sessions
get zeroed buffers and never share a writable buffer. --memory-mb is split
evenly over --max-sessions workers (each bounds its buffers, uploads and
cached weights by its share); --max-conns bounds connections.

SECURITY: anyone who can connect can run arbitrary GPU kernels on the device
and read the cached weights (by content hash); a hostile kernel can hang the
GPU for its own session, or crash the driver, which costs its session. There
is no TLS. Without a token, only requests naming a loopback address or
localhost in their Host header are served (and --allow-host names), which
stops web pages that rebind their DNS name to this machine. The server listens on loopback (127.0.0.1) unless told otherwise;
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
			opts := remote.ServerOptions{Token: token, Log: logger, AllowedHosts: allowHosts, MaxConns: maxConns}
			var closeDev func()
			if useBrowser && useVulkan {
				return fmt.Errorf("--browser and --vulkan exclude each other: the device is the browser's WebGPU or this machine's Vulkan")
			}
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
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				share := (memoryMB << 20) / int64(maxSessions)
				workerArgs := []string{workerCommand, "--backend", backend,
					"--memory-bytes", fmt.Sprint(share), "--cache-bytes", fmt.Sprint(min(cacheMB<<20, share))}
				if useVulkan {
					workerArgs = append(workerArgs, "--vulkan")
				}
				workers, err := remote.StartWorkers(remote.WorkerOptions{
					Command:     func() *exec.Cmd { return exec.Command(exe, workerArgs...) },
					MaxSessions: maxSessions,
					Log:         logger.Printf,
				})
				if err != nil {
					return err
				}
				closeDev = workers.Close
				opts.Workers = workers
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
				info := opts.Workers.Info()
				with := ""
				if len(info.Features) > 0 {
					with = " with " + strings.Join(info.Features, ", ")
				}
				logger.Printf("listening on ws://%s: device %s%s (use --target remote:ws://%s)", addr, info.Name, with, addr)
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
	f.BoolVar(&useVulkan, "vulkan", false, "serve this machine's Vulkan device through tapml's own SPIR-V, as the vulkan target runs it (with shader-f16 where the device has f16), instead of WebGPU")
	f.StringVar(&backend, "backend", "vulkan", "graphics API of the local WebGPU device: vulkan or gl (without --browser or --vulkan)")
	f.StringVar(&wasm, "wasm", "", "prebuilt browser device program (GOOS=js GOARCH=wasm go build "+browser.Package+"); default: build it")
	f.StringVar(&cacheDir, "cache-dir", "", "folder for the built browser device program (default "+browser.DefaultCacheDir()+")")
	f.Int64Var(&cacheMB, "weight-cache-mb", 1024, "MiB of weights kept cached while no host uses them, per worker (without --browser)")
	f.Int64Var(&memoryMB, "memory-mb", 8192, "MiB of device memory for all sessions, split evenly over --max-sessions (without --browser)")
	f.IntVar(&maxSessions, "max-sessions", 4, "host sessions served at once, each in its own worker process (without --browser)")
	f.IntVar(&maxConns, "max-conns", 32, "WebSocket connections open at once, authenticated or not")
	f.StringSliceVar(&allowHosts, "allow-host", nil, "host names requests may use besides loopback and localhost when there is no token (repeatable)")
	rootCmd.AddCommand(cmd)
	rootCmd.AddCommand(workerCmd())
}

// workerCommand is the hidden subcommand of a device server's worker
// process (runtime/remote's Workers start it; users never do).
const workerCommand = "serve-worker"

func workerCmd() *cobra.Command {
	var o remote.NativeWorkerOptions
	cmd := &cobra.Command{
		Use:    workerCommand,
		Short:  "A device server's worker process (started by tapmlc serve)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if os.Getenv(remote.WorkerEnv) != "1" {
				return fmt.Errorf("%s is started by tapmlc serve, not by hand", workerCommand)
			}
			return remote.RunNativeWorker(o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Backend, "backend", "vulkan", "graphics API of the local device")
	f.BoolVar(&o.Vulkan, "vulkan", false, "serve tapml's own Vulkan device instead of WebGPU")
	f.Int64Var(&o.MemoryBytes, "memory-bytes", 0, "memory budget of the worker's device")
	f.Int64Var(&o.CacheBytes, "cache-bytes", 0, "bytes of idle cached weights kept")
	return cmd
}
