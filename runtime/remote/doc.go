// Package remote runs tapml's kernels on a device in another process, on
// another machine or in a browser page: a host-side runtime.Device (Dial)
// and the device server (Server) that `tapmlc serve` runs.
//
// # Design
//
// The host does everything but run kernels: it generates each node's WGSL
// with codegen/wgsl for the limits the device announced in the handshake
// (and, under f16 compute on a device with shader-f16, at that precision:
// tensors the IR types f32 then cross the wire and live on the device as
// f16, rounded on upload and widened on download by the host),
// and sends the source, bindings, workgroup size and grid once per distinct
// kernel; the device compiles and caches the pipeline. Buffers are remote
// handles whose ids the host chooses, so launches need no round trip: they
// go in batches (MaxBatch launches and frees per frame), pipelined up to
// Window unanswered requests; a launch that fails on the device comes back
// from a later call as a runtime.KernelError naming its node. kv_write's
// output is its cache buffer (updated in place); reshape shares its input's
// remote buffer. Download and Sync are round trips. Weights (uploaded by the
// executor through runtime.WeightUploader) are cached on the device by
// content hash: the host asks first and never sends a cached weight again,
// across connections too; the device checks the hash and keeps cached
// weights read-only. The wire format is runtime/remote/proto's (frames,
// limits and messages are documented there); the device side, shared by
// the native server and the browser page, is runtime/remote/device.
//
// A native server (ServerOptions.Workers) runs each host session in a
// worker process (worker.go) over this machine's WebGPU device or, with
// `tapmlc serve --vulkan`, tapml's own Vulkan device (which compiles the
// WGSL through codegen/spirv and offers shader-f16 where it has f16): the server authenticates the host and passes
// its frames to the worker one at a time; a worker that dies costs its
// session only (the host gets a CodeLost error naming the request), and
// the pool starts another. Workers are reused between sessions, keeping
// their weight cache and pipelines but none of the last session's buffers.
//
// With --browser the server is a relay: it serves a page (package
// runtime/remote/browser) whose Go program, built for js/wasm over
// cogentcore/webgpu, attaches back at ws://HOST:PORT/attach and runs the
// same device code on the browser's WebGPU. A host connects to the server
// as to a native one; the server checks its version and token itself,
// answers the handshake with the page's device description, resets the
// page (freeing the last session's buffers, keeping its weight cache and
// pipelines) and then passes frames both ways unchanged. One host uses the
// page at a time; others wait up to ServerOptions.AttachWait. Host request
// ids are below 1<<31; the server's own (its Reset) are above, so replies
// never mix.
//
// # Timeouts
//
// Connecting and the handshake: DialTimeout (30 s; a relay may spend it
// waiting for a page). Every later wait of the host (a download, a sync, a
// compile, a weight query, a free slot in the window, a write): Timeout
// (60 s; ?timeout=D in the URL). A connection that breaks (the server is
// killed, the page is closed) fails the waiting call at once with
// "remote device ws://HOST:PORT: connection lost during launch of node #12
// matmul ... : ...", naming the oldest request that had no reply; a device
// that stops answering fails it after Timeout ("no reply within ...") and
// the device is closed. The server bounds a connection's first message by
// HandshakeTimeout (30 s) and each write by WriteTimeout (60 s); the native
// device bounds each GPU wait (runtime/webgpu's WaitTimeout).
//
// # Security
//
// Anyone who can connect to a device server can run arbitrary GPU kernels
// on its device and read the contents of cached weights whose content hash
// they know. The server promises: a kernel is checked before any compiler
// sees it (device.CheckKernel), and a driver crash that gets through costs
// its session only (worker processes); no session reads another's data
// (no shared writable buffers; pools freed between sessions, so buffers
// come zeroed from wgpu, and on the Vulkan device freed memory zeroed); without a token only requests whose Host names a
// loopback address, localhost or an AllowedHosts name are served (DNS
// rebinding), besides the WebSocket origin check; memory is bounded
// (handshake frames of 64 KiB before the token is checked, MaxConns,
// MaxSessions, each worker's device.Options.MemoryBytes, uploads that hold
// what arrived); wrong tokens are rate-limited per address. A kernel that
// hangs the GPU stalls its own session until the device's wait timeout.
// There is no TLS: tokens and tensors cross the network in the clear. The
// server listens on loopback (127.0.0.1) unless told otherwise. To serve
// other machines, require a token (--token or $TAPML_TOKEN; compared in
// constant time; hosts give ?token=T in the URL or $TAPML_TOKEN) and use a
// trusted network or an SSH tunnel. The host side refuses other protocol
// versions and escapes control characters in the server's text
// (proto.Printable). A malformed or oversized frame gets an error reply
// and never crashes the server; every frame, field, buffer and session is
// bounded (proto's limits, device.Options).
package remote
